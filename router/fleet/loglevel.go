package fleet

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
)

// belowLevel reports whether msg, a backend's notifications/message for the 2025 client
// session s, is below the level s set with logging/setLevel, so that it must not reach
// s. The backend's own filter is not enough: on a shared upstream session the last
// client's setLevel is the backend's level for every client, and it reaches the backend
// after the client was answered (SetLogLevel sends it in the background), so a call
// made right after setLevel may log at the old level. A session that set no level gets
// what the backend sends; a stateless request's messages are screened by the router
// (router.ScreenSend).
func (k *connector) belowLevel(s *router.Session, m *codec.Message) bool {
	if s == nil || s.Stateless() || string(m.Method) != "notifications/message" {
		return false
	}
	set := k.level(s)
	if set == "" {
		return false
	}
	l := modern.MessageLevel(m.Params)
	if l == nil {
		return false
	}
	at := modern.LogLevelIndex(l)
	return at >= 0 && at < modern.LogLevelIndex([]byte(set))
}

package admin

import (
	"fmt"
	"log"
	"log/slog"
	"strings"
)

// slogErrorLog routes the error logs of promhttp and net/http to slog, at warning level.
type slogErrorLog struct{ l *slog.Logger }

// Println implements promhttp.Logger.
func (e slogErrorLog) Println(v ...any) {
	e.l.Warn("admin: metrics", "err", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

// Write lets a *log.Logger write into slog (http.Server.ErrorLog).
func (e slogErrorLog) Write(p []byte) (int, error) {
	e.l.Warn("admin: http", "err", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (e slogErrorLog) std() *log.Logger { return log.New(e, "", 0) }

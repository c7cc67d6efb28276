package router

// stubFleet is what a test's Fleet leaves as it is: it offers tools, and a session's
// opening, closing and log level change nothing. A test's fleet embeds it and writes
// what the test is about (Prepare, Run, ...); any other method panics (the nil Fleet
// embedded): the test must not need it.
type stubFleet struct{ Fleet }

func (stubFleet) AppendCapabilities(dst []byte, _ string) []byte {
	return append(dst, `,"tools":{}`...)
}
func (stubFleet) SetLogLevel(*Session, string) {}
func (stubFleet) SessionOpened(*Session)       {}
func (stubFleet) SessionClosed(*Session)       {}

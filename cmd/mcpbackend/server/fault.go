package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// Faults is a set of ways the backend misbehaves on purpose (Config.Faults, --fault),
// so that what a router does with a hostile backend can be tested against a real
// process. Each fault in the set adds one tool, fault_<name>, that plays it; the other
// tools keep behaving, so one process serves the hostile calls and the healthy ones
// side by side. The zero value, the default, adds nothing.
type Faults uint16

// The faults. Each tool takes an optional boolean argument sse: a log message is sent
// before the answer, which makes a Streamable HTTP reply an SSE stream instead of a
// JSON body (stdio carries lines either way).
const (
	// FaultSlowBytes: fault_slow_bytes writes its answer one byte at a time, msPerByte
	// (default 50) apart, on the wire itself (HTTP body or stdout line).
	FaultSlowBytes Faults = 1 << iota
	// FaultOversize: fault_oversize answers with a text of bytes bytes (default
	// 9 MiB, above a router's default 8 MiB limit on one message).
	FaultOversize
	// FaultFlood: fault_flood sends count notifications (default 10000) before its
	// answer: kind log (notifications/message on the request's stream, the default),
	// progress (with the request's progress token), updated (resources/updated of the
	// resource uri, default counter://tick, outside the request) or listChanged
	// (tools/list_changed, outside the request).
	FaultFlood
	// FaultInvalidJSON: fault_invalid_json answers with bytes that are not JSON: the
	// answer cut off in the middle (shape truncated, the default: its id can still be
	// read) or text that is not JSON at all (shape garbage).
	FaultInvalidJSON
	// FaultUnknownID: fault_unknown_id sends a response under an id it was never given,
	// then its real answer; with alone true, only the stray response.
	FaultUnknownID
	// FaultDoubleAnswer: fault_double_answer answers twice with the same id: two
	// messages (on HTTP an SSE stream), or with batch true one JSON array of the two.
	FaultDoubleAnswer
	// FaultNeverAnswer: fault_never_answer never answers; it holds the request until
	// the client cancels it, its session ends, or Config.MaxSleep passes (then it
	// forgets it, still without an answer).
	FaultNeverAnswer

	// FaultsAll is every fault.
	FaultsAll = FaultSlowBytes | FaultOversize | FaultFlood | FaultInvalidJSON | FaultUnknownID | FaultDoubleAnswer | FaultNeverAnswer
)

// faultSpecs names the faults (as --fault takes them) and describes their tools.
var faultSpecs = []struct {
	fault Faults
	name  string
	tool  toolSpec
}{
	{FaultSlowBytes, "slow-bytes", toolSpec{name: "fault_slow_bytes", kind: toolFaultSlowBytes,
		description: "Hostile: writes its answer one byte at a time, msPerByte apart.",
		input:       `{"type":"object","properties":{"msPerByte":{"type":"integer","minimum":0},"sse":{"type":"boolean"}}}`}},
	{FaultOversize, "oversize", toolSpec{name: "fault_oversize", kind: toolFaultOversize,
		description: "Hostile: answers with a text of the given size (default 9 MiB).",
		input:       `{"type":"object","properties":{"bytes":{"type":"integer","minimum":0},"sse":{"type":"boolean"}}}`}},
	{FaultFlood, "flood-notifications", toolSpec{name: "fault_flood", kind: toolFaultFlood,
		description: "Hostile: sends count notifications of the given kind, then answers.",
		input:       `{"type":"object","properties":{"count":{"type":"integer","minimum":0},"kind":{"type":"string","enum":["log","progress","updated","listChanged"]},"uri":{"type":"string"},"sse":{"type":"boolean"}}}`}},
	{FaultInvalidJSON, "invalid-json", toolSpec{name: "fault_invalid_json", kind: toolFaultInvalidJSON,
		description: "Hostile: answers with bytes that are not JSON.",
		input:       `{"type":"object","properties":{"shape":{"type":"string","enum":["truncated","garbage"]},"sse":{"type":"boolean"}}}`}},
	{FaultUnknownID, "unknown-id", toolSpec{name: "fault_unknown_id", kind: toolFaultUnknownID,
		description: "Hostile: sends a response under an id it was never given, then (unless alone) its answer.",
		input:       `{"type":"object","properties":{"alone":{"type":"boolean"},"sse":{"type":"boolean"}}}`}},
	{FaultDoubleAnswer, "double-answer", toolSpec{name: "fault_double_answer", kind: toolFaultDoubleAnswer,
		description: "Hostile: answers twice.",
		input:       `{"type":"object","properties":{"batch":{"type":"boolean"},"sse":{"type":"boolean"}}}`}},
	{FaultNeverAnswer, "never-answer", toolSpec{name: "fault_never_answer", kind: toolFaultNeverAnswer,
		description: "Hostile: never answers (until cancelled).",
		input:       `{"type":"object","properties":{"sse":{"type":"boolean"}}}`}},
}

// ParseFaults reads a comma-separated list of fault names ("slow-bytes,oversize"),
// "all", or "" (none).
func ParseFaults(s string) (Faults, error) {
	var f Faults
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if name == "all" {
			f |= FaultsAll
			continue
		}
		found := false
		for _, fs := range faultSpecs {
			if fs.name == name {
				f |= fs.fault
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("fault %q: want all or some of %s", name, strings.Join(FaultNames(), ", "))
		}
	}
	return f, nil
}

// FaultNames lists the names ParseFaults knows.
func FaultNames() []string {
	names := make([]string, len(faultSpecs))
	for i, fs := range faultSpecs {
		names[i] = fs.name
	}
	return names
}

// String lists the faults in the set, comma-separated ("" for none).
func (f Faults) String() string {
	var names []string
	for _, fs := range faultSpecs {
		if f&fs.fault != 0 {
			names = append(names, fs.name)
		}
	}
	return strings.Join(names, ",")
}

// addFaultTools adds the tools of the faults in f to the catalog.
func (c *catalog) addFaultTools(f Faults) {
	for _, fs := range faultSpecs {
		if f&fs.fault != 0 {
			t := fs.tool
			t.title = "Fault: " + fs.name
			c.addTool(t)
		}
	}
}

// Defaults and bounds of the fault tools' arguments.
const (
	defaultSlowMsPerByte = 50
	defaultOversize      = 9 << 20
	defaultFloodCount    = 10_000
	maxFloodCount        = 1_000_000
)

// unknownIDBase is the first id of the stray responses fault_unknown_id sends: far
// above any id a router hands out in a test's lifetime, below 2^53.
const unknownIDBase = 1 << 50

// callFault plays the fault of tool kind k for request m.
func (s *Server) callFault(m *codec.Message, sess *Session, r Responder, args []byte, k toolKind) {
	if sse, _ := boolArg(args, "sse"); sse {
		s.logTo(r, sess, levelInfo, "fault: "+string(m.Name))
	}
	switch k {
	case toolFaultSlowBytes:
		ms, ok := intArg(args, "msPerByte", defaultSlowMsPerByte)
		if !ok || ms < 0 || time.Duration(ms)*time.Millisecond > s.cfg.MaxSleep/100 {
			toolError(r, m.ID, "fault_slow_bytes needs msPerByte between 0 and "+strconv.FormatInt(s.cfg.MaxSleep.Milliseconds()/100, 10))
			return
		}
		s.slowStdio(m, sess, r, time.Duration(ms)*time.Millisecond)
	case toolFaultOversize:
		n, ok := intArg(args, "bytes", defaultOversize)
		if !ok || n < 0 || n > int64(s.cfg.MaxPayload) {
			toolError(r, m.ID, "fault_oversize needs bytes between 0 and "+strconv.Itoa(s.cfg.MaxPayload))
			return
		}
		s.payload(m, sess, r, int(n))
	case toolFaultFlood:
		s.flood(m, sess, r, args)
	case toolFaultInvalidJSON:
		shape, _ := stringValue(member(args, "shape"))
		r.Reply(invalidReply(m.ID, shape))
	case toolFaultUnknownID:
		stray := codec.AppendResult(nil, strconv.AppendInt(nil, unknownIDBase+int64(s.nextCall.Add(1)), 10),
			[]byte(`{"content":[{"type":"text","text":"an answer to a request nobody sent"}]}`))
		if alone, _ := boolArg(args, "alone"); alone {
			r.Reply(stray)
			return
		}
		r.Send(stray)
		toolText(r, sess, m.ID, "answered after a stray response", nil)
	case toolFaultDoubleAnswer:
		answer := codec.AppendResult(nil, m.ID, []byte(`{"content":[{"type":"text","text":"answer"}]}`))
		if batch, _ := boolArg(args, "batch"); batch {
			// Both in one reply: an array, the only way one JSON body carries two.
			r.Reply(append(append(append(append([]byte{'['}, answer...), ','), answer...), ']'))
			return
		}
		r.Send(answer) // on HTTP this makes the reply an SSE stream
		r.Reply(answer)
	case toolFaultNeverAnswer:
		s.startOp(m, sess, r, &op{kind: opNever, steps: 1, interval: s.cfg.MaxSleep})
	}
}

// invalidReply is an answer to id that is not JSON: cut off in the middle (its id
// still readable), or (shape garbage) not JSON at all.
func invalidReply(id []byte, shape string) []byte {
	if shape == "garbage" {
		return []byte("<html>this is not JSON</html>")
	}
	b := beginResult(nil, id)
	return append(b, `{"content":[{"type":"text","text":"cut off`...)
}

// flood sends the notifications of fault_flood, then answers. It runs inline: a
// flood is meant to occupy the wire.
func (s *Server) flood(m *codec.Message, sess *Session, r Responder, args []byte) {
	n, ok := intArg(args, "count", defaultFloodCount)
	kind, _ := stringValue(member(args, "kind"))
	if !ok || n < 0 || n > maxFloodCount {
		toolError(r, m.ID, "fault_flood needs count between 0 and "+strconv.Itoa(maxFloodCount))
		return
	}
	var note []byte
	send := r.Send
	switch kind {
	case "", "log":
		note = codec.AppendNotification(nil, "notifications/message",
			[]byte(`{"level":"info","logger":"flood","data":"one of many notifications"}`))
	case "progress":
		if m.ProgressToken == nil {
			toolError(r, m.ID, "fault_flood with kind progress needs a progress token")
			return
		}
		p := append([]byte(`{"progressToken":`), m.ProgressToken...)
		note = codec.AppendNotification(nil, "notifications/progress", append(p, `,"progress":1}`...))
	case "updated", "listChanged":
		out := sess.sender()
		if out == nil {
			toolError(r, m.ID, "fault_flood with kind "+kind+" needs a session")
			return
		}
		send = out.Send
		uri, ok := stringValue(member(args, "uri"))
		if !ok {
			uri = "counter://tick"
		}
		note = codec.AppendNotification(nil, "notifications/resources/updated",
			append(append([]byte(`{"uri":`), codec.AppendString(nil, uri)...), '}'))
		if kind == "listChanged" {
			note = codec.AppendNotification(nil, "notifications/tools/list_changed", nil)
		}
	default:
		toolError(r, m.ID, "fault_flood: kind must be log, progress, updated or listChanged")
		return
	}
	sent := 0
	for ; sent < int(n); sent++ {
		if send(note) != nil {
			break // the session's queue is full or it is gone: that is what a flood finds
		}
	}
	toolText(r, sess, m.ID, "sent "+strconv.Itoa(sent)+" notifications", nil)
}

// boolArg reads a boolean argument; false when absent or not a boolean.
func boolArg(args []byte, name string) (v, ok bool) {
	switch string(member(args, name)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

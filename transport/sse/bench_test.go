package sse

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"testing"
)

// A typical MCP message on an SSE stream: a tools/call result of about 200 bytes.
var benchMsg = []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"The weather in Paris is 18 degrees and sunny, with a light breeze from the west."}],"isError":false,"structuredContent":{"temp":18}}}`)

// A pretty-printed 4 KiB message: many data lines per event.
var benchPretty = func() []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\n  \"result\": {\n    \"items\": [\n")
	for b.Len() < 4000 {
		b.WriteString("      {\"name\": \"item\", \"value\": 12345},\n")
	}
	b.WriteString("      {}\n    ]\n  }\n}")
	return b.Bytes()
}()

// eachMessage runs f as a sub-benchmark for each of the two messages (benchMsg and
// benchPretty), reporting allocations and the message's bytes per op.
func eachMessage(b *testing.B, f func(b *testing.B, data []byte)) {
	for _, m := range []struct {
		name string
		data []byte
	}{{"200B", benchMsg}, {"pretty4K", benchPretty}} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(m.data)))
			f(b, m.data)
		})
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	eachMessage(b, func(b *testing.B, data []byte) {
		dst := make([]byte, 0, 8192)
		id := EventID{Stream: 3, Seq: 123456}
		var idb [maxEventIDLen]byte
		for b.Loop() {
			dst = AppendEvent(dst[:0], id.Append(idb[:0]), "message", data)
		}
	})
}

// cycleReader returns its content over and over, in reads of at most chunk bytes.
type cycleReader struct {
	b     []byte
	off   int
	chunk int
}

func (r *cycleReader) Read(p []byte) (int, error) {
	p = p[:min(len(p), r.chunk)]
	n := copy(p, r.b[r.off:])
	r.off += n
	if r.off == len(r.b) {
		r.off = 0
	}
	return n, nil
}

func BenchmarkReaderNext(b *testing.B) {
	for _, bc := range []struct {
		name  string
		data  []byte
		chunk int
	}{{"200B", benchMsg, 16 << 10}, {"200B-chunk100", benchMsg, 100}, {"pretty4K", benchPretty, 16 << 10}} {
		b.Run(bc.name, func(b *testing.B) {
			var stream []byte
			for i := 0; i < 64; i++ {
				stream = AppendEvent(stream, EventID{Stream: 1, Seq: uint64(i + 1)}.Append(nil), "", bc.data)
			}
			r := NewReader(&cycleReader{b: stream, chunk: bc.chunk}, 0)
			b.ReportAllocs()
			b.SetBytes(int64(len(stream) / 64))
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseEventID(b *testing.B) {
	id := []byte("12-4567890")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseEventID(id); !ok {
			b.Fatal("parse")
		}
	}
}

// BenchmarkPublish publishes on a stream without a consumer, in the steady state where
// every event evicts the oldest one.
func BenchmarkPublish(b *testing.B) {
	s := NewStream(1, StreamConfig{})
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if _, err := s.Publish("", benchMsg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishParallel publishes on one stream from all Ps: the lock's contention.
func BenchmarkPublishParallel(b *testing.B) {
	s := NewStream(1, StreamConfig{})
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Publish("", benchMsg); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// backlog is how many events the stream's consumer has not taken yet.
func (s *Stream) backlog() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cons == nil {
		return 0
	}
	return s.last + 1 - s.cons.next
}

// BenchmarkPublishPump is end-to-end throughput: Publish on one goroutine, Pump to a
// discarding bufio.Writer on another, the publisher pausing when the consumer is 512
// events behind (a real publisher is paced by its backends; this one is not, and would
// otherwise just measure the cut-off).
func BenchmarkPublishPump(b *testing.B) {
	eachMessage(b, func(b *testing.B, data []byte) {
		s := NewStream(1, StreamConfig{RingEvents: 4096, RingBytes: 64 << 20, QueueBytes: 64 << 20})
		c, err := s.Attach(0)
		if err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- c.Pump(bufio.NewWriterSize(io.Discard, 16<<10), PumpOptions{KeepAlive: -1}) }()
		i := 0
		for b.Loop() {
			if _, err := s.Publish("", data); err != nil {
				b.Fatal(err)
			}
			if i++; i%256 == 0 {
				for spins := 0; s.backlog() > 512; spins++ {
					if spins > 1e7 {
						b.Fatal("the pump does not progress")
					}
					runtime.Gosched()
				}
			}
		}
		s.Close(0)
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		if st := s.Stats().Snapshot(); st.CutOffs != 0 || st.Written != st.Bytes {
			b.Fatalf("stats %+v", st)
		}
	})
}

// BenchmarkPumpResume measures a resumption: replaying a full ring of 1024 200-byte
// events to a new consumer.
func BenchmarkPumpResume(b *testing.B) {
	s := NewStream(1, StreamConfig{})
	for i := 0; i < 1024; i++ {
		s.Publish("", benchMsg)
	}
	s.Close(0)
	w := bufio.NewWriterSize(io.Discard, 16<<10)
	b.ReportAllocs()
	b.SetBytes(int64(1024 * len(benchMsg)))
	for b.Loop() {
		c, err := s.Resume(0)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Pump(w, PumpOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

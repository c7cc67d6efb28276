package workers_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/workers"
)

// call is a pooled job: a request that registers itself in Prepare and does its slow
// part in Run.
type call struct {
	sess *sess
	id   int
	out  chan<- string
}

// sess is what a router keeps per session.
type sess struct {
	mu       sync.Mutex
	inflight map[int]bool
}

var callPool = sync.Pool{New: func() any { return new(call) }}

func (c *call) Prepare() bool {
	c.sess.mu.Lock()
	c.sess.inflight[c.id] = true // a later cancel, prepared after this, will find it
	c.sess.mu.Unlock()
	return true
}

func (c *call) Run() {
	c.out <- fmt.Sprintf("request %d done", c.id) // the backend round trip would go here
	c.finish()
}

func (c *call) Fail(err error) {
	c.out <- fmt.Sprintf("request %d failed: %v", c.id, err) // the router maps err to a JSON-RPC error
	c.finish()
}

func (c *call) finish() {
	c.sess.mu.Lock()
	delete(c.sess.inflight, c.id)
	c.sess.mu.Unlock()
	*c = call{}
	callPool.Put(c) // the final call may recycle the job
}

func Example() {
	d, err := workers.New(workers.Config{Shards: 4, QueueDepth: 64, PoolSize: 16})
	if err != nil {
		panic(err)
	}
	s := &sess{inflight: map[int]bool{}}
	out := make(chan string, 1)
	key := workers.KeyOfString("session-42")

	c := callPool.Get().(*call)
	c.sess, c.id, c.out = s, 1, out
	if err := d.Dispatch(key, c); err != nil {
		// Refused: we still own c. Answer with an error (the router maps an
		// *OverloadError to JSON-RPC's overloaded error with its RetryAfter).
		fmt.Println("refused:", err)
		callPool.Put(c)
	}
	select {
	case line := <-out:
		fmt.Println(line)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(d.Close(ctx))
	fmt.Println(d.Dispatch(key, new(call)))
	// Output:
	// request 1 done
	// <nil>
	// workers: dispatcher closed
}

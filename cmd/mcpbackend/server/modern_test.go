package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// Raw 2026-07-28 exchanges with the HTTP endpoint: the statuses, codes and shapes the
// revision asks for, which a client SDK does not show.

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

type reply struct {
	status int
	ctype  string
	body   map[string]any
	raw    string
}

// post sends one request with the standard headers (hdr overrides them; a "" value drops
// one) and decodes the JSON answer, or the last event of a stream.
func post(t *testing.T, url, body string, hdr map[string]string) reply {
	t.Helper()
	req := modernRequest(url, body)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: string(raw)}
	text := string(raw)
	if strings.HasPrefix(r.ctype, "text/event-stream") {
		events := strings.Split(strings.TrimSpace(text), "\n\n")
		text = strings.TrimPrefix(events[len(events)-1], "event: message\ndata: ")
	}
	if len(text) > 0 {
		if err := json.Unmarshal([]byte(text), &r.body); err != nil {
			t.Fatalf("answer %q: %v", text, err)
		}
	}
	return r
}

// modernRequest is a 2026-07-28 POST of body to url with the headers the revision asks
// for: MCP-Protocol-Version, and Mcp-Method and Mcp-Name as the body says.
func modernRequest(url, body string) *http.Request {
	var probe struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(body), &probe)
	return mcpraw.NewModernRequest(context.Background(), url, body, probe.Method, probe.Params.Name+probe.Params.URI)
}

func (r reply) code() float64 {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func (r reply) result() map[string]any {
	res, _ := r.body["result"].(map[string]any)
	return res
}

func TestModernHTTP(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Tick: -1, Name: "raw-test", Version: "9"})
	url := s.URL()
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`

	t.Run("discover", func(t *testing.T) {
		r := post(t, url, discover, nil)
		res := r.result()
		if r.status != 200 || res["resultType"] != "complete" || res["cacheScope"] != "public" || res["ttlMs"] == nil ||
			res["capabilities"] == nil || res["instructions"] == "" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		sup := res["supportedVersions"].([]any)
		if sup[0] != "2026-07-28" || sup[1] != "2025-11-25" {
			t.Errorf("supportedVersions %v", sup)
		}
		info := res["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
		if info["name"] != "raw-test" || info["version"] != "9" {
			t.Errorf("serverInfo %v", info)
		}
	})

	for _, tc := range []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		code   float64
	}{
		{"no _meta", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil, 400, -32602},
		{"no capabilities", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, 400, -32602},
		{"unsupported version", strings.ReplaceAll(discover, `"2026-07-28"`, `"v999.0.0"`), map[string]string{"MCP-Protocol-Version": "v999.0.0"}, 400, -32022},
		{"version header mismatch", strings.ReplaceAll(discover, `"2026-07-28"`, `"v999.0.0"`), nil, 400, -32020},
		{"method header mismatch", discover, map[string]string{"Mcp-Method": "tools/list"}, 400, -32020},
		{"missing name header", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + meta + `}}`, map[string]string{"Mcp-Name": ""}, 400, -32020},
		{"removed method", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{` + meta + `}}`, nil, 404, -32601},
		{"unknown method", `{"jsonrpc":"2.0","id":6,"method":"nope","params":{` + meta + `}}`, nil, 404, -32601},
		{"unknown resource", `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"nope://x",` + meta + `}}`, nil, 200, -32602},
		{"sample without the capability", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, 400, -32021},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, url, tc.body, tc.hdr)
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %v, want %d %v: %s", r.status, r.code(), tc.status, tc.code, r.raw)
			}
			if tc.code == -32022 {
				data := r.body["error"].(map[string]any)["data"].(map[string]any)
				if data["requested"] != "v999.0.0" || len(data["supported"].([]any)) == 0 {
					t.Errorf("data %v", data)
				}
			}
			if tc.code == -32021 {
				data := r.body["error"].(map[string]any)["data"].(map[string]any)
				if _, ok := data["requiredCapabilities"].(map[string]any)["sampling"]; !ok {
					t.Errorf("data %v", data)
				}
			}
			if r.body["id"] == nil {
				t.Errorf("the error does not carry the request's id: %s", r.raw)
			}
		})
	}

	t.Run("results carry resultType, serverInfo and caching", func(t *testing.T) {
		res := post(t, url, `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{`+meta+`}}`, nil).result()
		if res["resultType"] != "complete" || res["ttlMs"] != 300000.0 || res["cacheScope"] != "public" || len(res["tools"].([]any)) == 0 ||
			res["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"] == nil {
			t.Errorf("tools/list %v", res)
		}
		res = post(t, url, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},`+meta+`}}`, nil).result()
		if res["resultType"] != "complete" || res["ttlMs"] != nil || res["structuredContent"].(map[string]any)["text"] != "hi" {
			t.Errorf("tools/call %v", res)
		}
	})

	t.Run("no log messages without a logLevel", func(t *testing.T) {
		r := post(t, url, `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"log","arguments":{"level":"emergency","message":"m"},`+meta+`}}`, nil)
		if r.ctype != "application/json" || strings.Contains(r.raw, "notifications/message") {
			t.Errorf("%s: %s", r.ctype, r.raw)
		}
		withLevel := strings.Replace(meta, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"error",`, 1)
		r = post(t, url, `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"log","arguments":{"level":"emergency","message":"m"},`+withLevel+`}}`, nil)
		if !strings.HasPrefix(r.ctype, "text/event-stream") || !strings.Contains(r.raw, "notifications/message") || r.result()["resultType"] != "complete" {
			t.Errorf("%s: %s", r.ctype, r.raw)
		}
	})

	t.Run("sampling round trip", func(t *testing.T) {
		call := `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"say hi"},` + meta + `}}`
		res := post(t, url, call, nil).result()
		if res["resultType"] != "input_required" || res["ttlMs"] != nil {
			t.Fatalf("first answer %v", res)
		}
		ir := res["inputRequests"].(map[string]any)["sample"].(map[string]any)
		state := res["requestState"].(string)
		if ir["method"] != "sampling/createMessage" || state == "" {
			t.Fatalf("input requests %v", res)
		}
		retry := func(state, prompt string) reply {
			body := strings.Replace(call, `"id":20`, `"id":21`, 1)
			body = strings.Replace(body, `"say hi"`, `"`+prompt+`"`, 1)
			body = strings.Replace(body, `"_meta"`, `"inputResponses":{"sample":{"role":"assistant","model":"m","content":{"type":"text","text":"hello"}}},"requestState":"`+state+`","_meta"`, 1)
			return post(t, url, body, nil)
		}
		r := retry(state, "say hi")
		if r.result()["resultType"] != "complete" || !strings.Contains(r.raw, `"text":"hello"`) {
			t.Fatalf("retry %s", r.raw)
		}
		tampered := []byte(state)
		tampered[len(tampered)/2] ^= 1
		if r := retry(string(tampered), "say hi"); r.code() != -32602 || !strings.Contains(r.raw, "verification") {
			t.Errorf("tampered state: %s", r.raw)
		}
		if r := retry(state, "say bye"); r.code() != -32602 || !strings.Contains(r.raw, "another request") {
			t.Errorf("state of another request: %s", r.raw)
		}
	})

	t.Run("GET and DELETE are not part of the revision", func(t *testing.T) {
		c := &mcpraw.Client{URL: url, Header: http.Header{"MCP-Protocol-Version": {mcpraw.ModernVersion}}}
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			resp, err := c.Do(c.NewRequest(context.Background(), m, ""))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 405 {
				t.Errorf("%s: %d", m, resp.StatusCode)
			}
		}
	})
}

// TestModernListen: subscriptions/listen acknowledges the honoured part of the filter
// first, tags every update with the subscriptionId, and ends with a completion result
// when the server closes.
func TestModernListen(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Tick: -1})
	body := `{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["memo://board","nope://x"]},` + meta + `}}`
	resp, err := http.DefaultClient.Do(modernRequest(s.URL(), body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan map[string]any, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v map[string]any
				json.Unmarshal([]byte(data), &v)
				events <- v
			}
		}
	}()
	next := func() map[string]any {
		select {
		case v, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return v
		case <-time.After(mcpbackendtest.Wait):
			t.Fatal("no event")
		}
		return nil
	}
	subID := func(v map[string]any) any {
		for _, k := range []string{"params", "result"} {
			if p, ok := v[k].(map[string]any); ok {
				return p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"]
			}
		}
		return nil
	}
	ack := next()
	filter := ack["params"].(map[string]any)["notifications"].(map[string]any)
	if ack["method"] != "notifications/subscriptions/acknowledged" || subID(ack) != "sub-1" ||
		filter["toolsListChanged"] != nil || len(filter["resourceSubscriptions"].([]any)) != 1 {
		t.Fatalf("ack %v", ack)
	}
	touch := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"memo://board"},` + meta + `}}`
	if r := post(t, s.URL(), touch, nil); r.result()["isError"] == true {
		t.Fatalf("touch %s", r.raw)
	}
	up := next()
	if up["method"] != "notifications/resources/updated" || subID(up) != "sub-1" || up["params"].(map[string]any)["uri"] != "memo://board" {
		t.Fatalf("update %v", up)
	}
	ctx, cancel := context.WithTimeout(context.Background(), mcpbackendtest.Wait)
	defer cancel()
	go s.Close(ctx)
	end := next()
	if end["id"] != "sub-1" || subID(end) != "sub-1" || end["result"].(map[string]any)["resultType"] != "complete" {
		t.Fatalf("end %v", end)
	}
}

// TestModernDisconnectCancels: on HTTP a 2026-07-28 client cancels by closing the
// response stream; the server notices at its next keep-alive and ends the request (a
// call in flight, a listen stream).
func TestModernDisconnectCancels(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Tick: -1, KeepAlive: 10 * time.Millisecond})
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["memo://board"]},` + meta + `}}`,
	} {
		req := modernRequest(s.URL(), body)
		method := req.Header.Get("Mcp-Method")
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: %d %s", method, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		testwait.For(t, method+" cancelled after the client closed its stream", mcpbackendtest.Wait, func() bool {
			return s.Stats.Cancelled.Load() >= uint64(i+1)
		})
	}
}

package policy_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// The router's side: one request through the rules and the limits, and one filtered
// list.
func Example() {
	e, err := policy.New(policy.Config{
		Rules: []policy.Rule{
			{Allow: `principal.sub == "alice"`},
			{Name: "no-fail", Deny: `mcp.tool == "ref__fail" && !("admin" in principal.scopes)`},
		},
		Limits: []policy.Limit{{Name: "per-principal", Key: policy.KeyParts{policy.KeyPrincipal}, Rate: 10}},
	}, policy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	var memo policy.SubjectMemo // kept with the session
	s := memo.Get(&auth.Principal{Subject: "alice"})

	// Dispatch: the scanned request, routed to its backend.
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ref__fail","arguments":{}}}`)
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		fmt.Println(err)
		return
	}
	var in policy.Input
	if err := in.FromMessage(&m); err != nil {
		fmt.Println(err) // -32602
		return
	}
	in.Backend = "ref"
	d := e.Decide(s, &in)
	if !d.Allowed {
		fmt.Println(d.Message(&in))
		e.Audit(context.Background(), &policy.Event{Subject: s, Input: &in, Outcome: policy.OutcomeDenied, Decision: &d})
	} else if v := e.Take(s, &in); !v.Allowed {
		fmt.Printf("limited, data %s\n", codec.AppendRetryData(nil, v.RetryAfter))
	}

	// A list: the items of the merged catalog, filtered for the principal.
	items := []policy.Item{
		{Kind: policy.ItemTool, Name: "ref__echo", Backend: "ref"},
		{Kind: policy.ItemTool, Name: "ref__fail", Backend: "ref"},
	}
	mask := e.View(s).Mask(1, items) // 1: the catalog's version of this list
	for i, it := range items {
		if mask[i/64]&(1<<(i%64)) != 0 {
			fmt.Println("listed:", it.Name)
		}
	}
	// Output:
	// policy denies tools/call of tool "ref__fail" (rule "no-fail")
	// listed: ref__echo
}

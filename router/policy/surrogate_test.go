package policy

import (
	"encoding/json"
	"testing"
)

// TestReplaceLoneSurrogates: each string decodes, after the rewrite, to what
// encoding/json makes of the original; inputs without a lone surrogate are not copied.
func TestReplaceLoneSurrogates(t *testing.T) {
	for _, tc := range []struct {
		in     string
		copied bool
	}{
		{`"plain"`, false},
		{`"\ud83d\ude00"`, false},      // a whole pair
		{`"\\ud800"`, false},           // an escaped backslash, then text
		{`"\u00e9\n\"\\"`, false},      // other escapes
		{`"\ud800"`, true},             // a lone high half
		{`"\udc00"`, true},             // a lone low half
		{`"\ud800\u0041"`, true},       // a high half followed by another escape
		{`"\ud800\ud800\udc00"`, true}, // a lone high half, then a pair
		{`"\\\ud800"`, true},           // an escaped backslash, then a lone half
		{`"\ud80"`, false},             // too short to be an escape: left to the parser
	} {
		got := replaceLoneSurrogates([]byte(tc.in))
		if copied := string(got) != tc.in; copied != tc.copied {
			t.Errorf("%s: rewritten to %s, want copied=%v", tc.in, got, tc.copied)
		}
		var want, have any
		if json.Unmarshal([]byte(tc.in), &want) != nil {
			continue
		}
		if err := json.Unmarshal(got, &have); err != nil || have != want {
			t.Errorf("%s: %s decodes to %q (%v), encoding/json makes %q of the original", tc.in, got, have, err, want)
		}
	}
}

package upstream

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRenewAt: a token is replaced refreshAhead before it expires, or after three
// quarters of a short life; one without an expiry is kept until refused.
func TestRenewAt(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		life, want time.Duration
	}{
		{time.Hour, time.Hour - refreshAhead},
		{4 * refreshAhead, 3 * refreshAhead},
		{8 * time.Second, 6 * time.Second},
		{0, -1},
	} {
		expiry := time.Time{}
		if tc.life > 0 {
			expiry = start.Add(tc.life)
		}
		got := renewAt(start, expiry)
		if tc.want < 0 {
			if !got.IsZero() {
				t.Errorf("no expiry: renew at %v, want never", got)
			}
			continue
		}
		if d := got.Sub(start); d != tc.want {
			t.Errorf("life %v: renewed after %v, want %v", tc.life, d, tc.want)
		}
	}
}

// fetchFunc adapts a function to a fetcher.
type fetchFunc func(context.Context) (fetched, error)

func (f fetchFunc) fetch(ctx context.Context) (fetched, error) { return f(ctx) }

// TestTokenCacheDrop: a refusal drops the token it names, not a newer one, and a failed
// fetch is not kept.
func TestTokenCacheDrop(t *testing.T) {
	c := newTokenCache(4)
	n := 0
	f := fetchFunc(func(context.Context) (fetched, error) {
		n++
		return fetched{value: "v" + string(rune('0'+n))}, nil
	})
	get := func() string {
		v, err := c.get(context.Background(), "k", f)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := get(); v != "v1" || get() != "v1" {
		t.Fatalf("first value %q, fetched %d times", v, n)
	}
	c.drop("k", "v0") // a stale refusal: v1 stays
	if get() != "v1" {
		t.Fatal("a refusal of an older token dropped the current one")
	}
	c.drop("k", "v1")
	if v := get(); v != "v2" {
		t.Fatalf("after the refusal: %q", v)
	}
	boom := errors.New("boom")
	if _, err := c.get(context.Background(), "other", fetchFunc(func(context.Context) (fetched, error) {
		return fetched{}, boom
	})); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if c.len() != 1 {
		t.Fatalf("%d entries, want 1 (failures are not kept)", c.len())
	}
}

package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRequestStateKey: the secret comes from the environment or a file, the same
// secret gives the same key wherever it is read, a short or missing secret is an error
// that names its key (and never shows the secret), and both sources at once are refused.
func TestRequestStateKey(t *testing.T) {
	const secret = "a-secret-of-at-least-thirty-two-characters"
	t.Setenv("MCPROUTER_TEST_STATE", secret)
	t.Setenv("MCPROUTER_TEST_SHORT", "tiny-secret")
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	none, err := RequestStateConfig{}.key()
	if err != nil || none != nil {
		t.Fatalf("no secret: %x %v, want no key", none, err)
	}
	fromEnv, err := RequestStateConfig{KeyEnv: "MCPROUTER_TEST_STATE"}.key()
	if err != nil || len(fromEnv) != 32 {
		t.Fatalf("key_env: %x %v", fromEnv, err)
	}
	fromFile, err := RequestStateConfig{KeyFile: file}.key()
	if err != nil || !bytes.Equal(fromEnv, fromFile) {
		t.Fatalf("key_file: %x %v, want the key of the same secret", fromFile, err)
	}
	for _, tc := range []struct {
		c    RequestStateConfig
		want string
	}{
		{RequestStateConfig{KeyEnv: "MCPROUTER_TEST_SHORT"}, "request_state.key_env: the secret is shorter"},
		{RequestStateConfig{KeyEnv: "MCPROUTER_TEST_UNSET"}, "request_state.key_env: MCPROUTER_TEST_UNSET is not set"},
		{RequestStateConfig{KeyFile: file + ".missing"}, "request_state.key_file"},
	} {
		if _, err := tc.c.key(); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "tiny-secret") {
			t.Errorf("%+v: %v, want an error saying %q", tc.c, err, tc.want)
		}
	}

	if _, err := ParseConfig([]byte("request_state: {key_env: A, key_file: /b}\n")); err == nil || !strings.Contains(err.Error(), "request_state") {
		t.Errorf("both sources: %v, want a refusal naming request_state", err)
	}
	if _, err := ParseConfig([]byte("request_state: {key_env: A}\n")); err != nil {
		t.Errorf("key_env alone: %v", err)
	}
}

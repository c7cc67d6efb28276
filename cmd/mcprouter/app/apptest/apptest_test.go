package apptest

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
)

// A router with no backend starts, answers on its listener, and is shut down by the
// test's cleanup.
func TestStart(t *testing.T) {
	a := Start(t, app.Config{Listen: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Second)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(a.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Errorf("GET %s: %s", a.URL(), resp.Status)
	}
}

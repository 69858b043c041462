package cli

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// AWAKEN_PPROF serves the heap profile with the runtime's memory figures on a loopback
// address, and refuses any other address.
func TestPprofServesOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:6060", ":6060"} {
		if _, err := servePprof(addr, zerolog.Nop()); !errors.Is(err, errPprofNotLoopback) {
			t.Errorf("servePprof(%q) = %v, want %v", addr, err, errPprofNotLoopback)
		}
	}
	at, err := servePprof("127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + at.String() + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "# HeapInuse = ") {
		t.Fatalf("heap profile: %s, %.200q", resp.Status, body)
	}
}

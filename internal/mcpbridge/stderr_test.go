package mcpbridge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestStderrAtDebug: a server's stderr lines are logged at debug, so an info log (the
// default) is not flooded by protocol traces, and a debug log has every line.
func TestStderrAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level zerolog.Level
		lines int
	}{{zerolog.InfoLevel, 0}, {zerolog.DebugLevel, 2}} {
		var b bytes.Buffer
		l := &lineLogger{log: zerolog.New(&b).Level(tc.level)}
		if _, err := l.Write([]byte("trace one\ntrace two\n")); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(b.String(), `"level":"debug"`); got != tc.lines {
			t.Errorf("at %s: %d debug lines, want %d:\n%s", tc.level, got, tc.lines, b.String())
		}
	}
}

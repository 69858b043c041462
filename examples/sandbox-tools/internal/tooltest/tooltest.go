// Package tooltest runs the table tests of awaken's example sandbox tools: each case
// feeds the tool's run function one stdin and checks its exit status, stdout and stderr.
package tooltest

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Case is one call of a tool. WantStdout is compared after trimming white space;
// WantStderr need only be contained in what the tool wrote to stderr.
type Case struct {
	Name       string
	Stdin      string
	WantCode   int
	WantStdout string
	WantStderr string
}

// RunFunc is a tool's entry point: it reads stdin, writes stdout and stderr, and
// returns the exit status.
type RunFunc func(stdin io.Reader, stdout, stderr io.Writer) int

// Run runs every case as a subtest against run.
func Run(t *testing.T, run RunFunc, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(strings.NewReader(tc.Stdin), &stdout, &stderr)
			if code != tc.WantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.WantCode, stderr.String())
			}
			if got := strings.TrimSpace(stdout.String()); got != tc.WantStdout {
				t.Errorf("stdout %q, want %q", got, tc.WantStdout)
			}
			if !strings.Contains(stderr.String(), tc.WantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tc.WantStderr)
			}
		})
	}
}

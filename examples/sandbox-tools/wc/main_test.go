package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "empty text", stdin: `{"text":""}`, wantStdout: `{"lines":0,"words":0,"bytes":0}`},
		{name: "no trailing newline", stdin: `{"text":"hello world"}`, wantStdout: `{"lines":0,"words":2,"bytes":11}`},
		{name: "lines count newlines", stdin: `{"text":"a b\nc\n\n"}`, wantStdout: `{"lines":3,"words":3,"bytes":7}`},
		{name: "runs of white space", stdin: `{"text":"  a\t\tb  \r\n c "}`, wantStdout: `{"lines":1,"words":3,"bytes":13}`},
		{name: "multibyte counts bytes", stdin: `{"text":"héllo wörld"}`, wantStdout: `{"lines":0,"words":2,"bytes":13}`},
		{name: "unicode space separates", stdin: `{"text":"a\u00a0b\u2003c"}`, wantStdout: `{"lines":0,"words":3,"bytes":8}`},
		{name: "invalid json", stdin: `{"text":`, wantCode: 2, wantStderr: "wc: invalid input"},
		{name: "empty stdin", stdin: ``, wantCode: 2, wantStderr: "got nothing"},
		{name: "missing text", stdin: `{}`, wantCode: 2, wantStderr: `missing required string field "text"`},
		{name: "text not a string", stdin: `{"text":3}`, wantCode: 2, wantStderr: "wc: invalid input"},
		{name: "unknown field", stdin: `{"text":"a","txt":"b"}`, wantCode: 2, wantStderr: `unknown field "txt"`},
		{name: "trailing data", stdin: `{"text":"a"} {}`, wantCode: 2, wantStderr: "unexpected data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if got := strings.TrimSpace(stdout.String()); got != tt.wantStdout {
				t.Errorf("stdout %q, want %q", got, tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

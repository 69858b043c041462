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
		// Digests from sha256sum(1).
		{name: "empty text", stdin: `{"text":""}`, wantStdout: `{"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`},
		{name: "abc", stdin: `{"text":"abc"}`, wantStdout: `{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}`},
		{name: "utf-8 bytes", stdin: `{"text":"é"}`, wantStdout: `{"sha256":"4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c"}`},
		{name: "invalid json", stdin: `not json`, wantCode: 2, wantStderr: "sha256: invalid input"},
		{name: "missing text", stdin: `{"other":1}`, wantCode: 2, wantStderr: `unknown field "other"`},
		{name: "null text", stdin: `{"text":null}`, wantCode: 2, wantStderr: `missing required string field "text"`},
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

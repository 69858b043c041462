package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const doc = `{"a":{"b":[{"c":42},{"c":"x"}],"n":null},"dotted.key":[1,2,3],"big":12345678901234567890}`
	tests := []struct {
		name       string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "nested path", stdin: `{"document":` + doc + `,"path":"a.b[0].c"}`, wantStdout: `42`},
		{name: "second element", stdin: `{"document":` + doc + `,"path":"a.b[1].c"}`, wantStdout: `"x"`},
		{name: "object result", stdin: `{"document":` + doc + `,"path":"a.b[0]"}`, wantStdout: `{"c":42}`},
		{name: "null value is found", stdin: `{"document":` + doc + `,"path":"a.n"}`, wantStdout: `null`},
		{name: "empty path is the document", stdin: `{"document":[1,2],"path":""}`, wantStdout: `[1,2]`},
		{name: "leading index", stdin: `{"document":[[5,6]],"path":"[0][1]"}`, wantStdout: `6`},
		{name: "quoted key", stdin: `{"document":` + doc + `,"path":"[\"dotted.key\"][2]"}`, wantStdout: `3`},
		{name: "numbers kept exact", stdin: `{"document":` + doc + `,"path":"big"}`, wantStdout: `12345678901234567890`},
		{name: "string document is parsed", stdin: `{"document":"{\"a\":{\"b\":[7]}}","path":"a.b[0]"}`, wantStdout: `7`},
		{name: "html not escaped", stdin: `{"document":{"h":"<a>&"},"path":"h"}`, wantStdout: `"<a>&"`},
		{name: "missing key", stdin: `{"document":` + doc + `,"path":"a.x"}`, wantCode: 1, wantStderr: `key "x" not found in a`},
		{name: "index out of range", stdin: `{"document":` + doc + `,"path":"a.b[5].c"}`, wantCode: 1, wantStderr: `index 5 out of range in a.b (length 2)`},
		{name: "index into object", stdin: `{"document":` + doc + `,"path":"a[0]"}`, wantCode: 1, wantStderr: `a is an object, not an array`},
		{name: "key into array", stdin: `{"document":` + doc + `,"path":"a.b.c"}`, wantCode: 1, wantStderr: `a.b is an array, not an object`},
		{name: "step into scalar", stdin: `{"document":` + doc + `,"path":"a.b[0].c.d"}`, wantCode: 1, wantStderr: `a.b[0].c is a number, which has no .d`},
		{name: "invalid json", stdin: `{"document":`, wantCode: 2, wantStderr: "jsonq: invalid input"},
		{name: "missing document", stdin: `{"path":"a"}`, wantCode: 2, wantStderr: `missing required field "document"`},
		{name: "missing path", stdin: `{"document":{}}`, wantCode: 2, wantStderr: `missing required string field "path"`},
		{name: "string document not json", stdin: `{"document":"hello","path":""}`, wantCode: 2, wantStderr: "document is a string but not JSON text"},
		{name: "empty key", stdin: `{"document":{},"path":"a..b"}`, wantCode: 2, wantStderr: "empty key"},
		{name: "trailing dot", stdin: `{"document":{},"path":"a."}`, wantCode: 2, wantStderr: "path ends with '.'"},
		{name: "negative index", stdin: `{"document":[1],"path":"[-1]"}`, wantCode: 2, wantStderr: "not a non-negative integer"},
		{name: "unterminated bracket", stdin: `{"document":[1],"path":"[0"}`, wantCode: 2, wantStderr: "missing ']'"},
		{name: "bracket after dot", stdin: `{"document":{"a":[1]},"path":"a.[0]"}`, wantCode: 2, wantStderr: "'[' after '.'"},
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

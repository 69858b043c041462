package main

import (
	"testing"

	"github.com/awaken-dev/awaken/examples/sandbox-tools/internal/tooltest"
)

func TestRun(t *testing.T) {
	const doc = `{"a":{"b":[{"c":42},{"c":"x"}],"n":null},"dotted.key":[1,2,3],"big":12345678901234567890}`
	tooltest.Run(t, run, []tooltest.Case{
		{Name: "nested path", Stdin: `{"document":` + doc + `,"path":"a.b[0].c"}`, WantStdout: `42`},
		{Name: "second element", Stdin: `{"document":` + doc + `,"path":"a.b[1].c"}`, WantStdout: `"x"`},
		{Name: "object result", Stdin: `{"document":` + doc + `,"path":"a.b[0]"}`, WantStdout: `{"c":42}`},
		{Name: "null value is found", Stdin: `{"document":` + doc + `,"path":"a.n"}`, WantStdout: `null`},
		{Name: "empty path is the document", Stdin: `{"document":[1,2],"path":""}`, WantStdout: `[1,2]`},
		{Name: "leading index", Stdin: `{"document":[[5,6]],"path":"[0][1]"}`, WantStdout: `6`},
		{Name: "quoted key", Stdin: `{"document":` + doc + `,"path":"[\"dotted.key\"][2]"}`, WantStdout: `3`},
		{Name: "numbers kept exact", Stdin: `{"document":` + doc + `,"path":"big"}`, WantStdout: `12345678901234567890`},
		{Name: "string document is parsed", Stdin: `{"document":"{\"a\":{\"b\":[7]}}","path":"a.b[0]"}`, WantStdout: `7`},
		{Name: "html not escaped", Stdin: `{"document":{"h":"<a>&"},"path":"h"}`, WantStdout: `"<a>&"`},
		{Name: "missing key", Stdin: `{"document":` + doc + `,"path":"a.x"}`, WantCode: 1, WantStderr: `key "x" not found in a`},
		{Name: "index out of range", Stdin: `{"document":` + doc + `,"path":"a.b[5].c"}`, WantCode: 1, WantStderr: `index 5 out of range in a.b (length 2)`},
		{Name: "index into object", Stdin: `{"document":` + doc + `,"path":"a[0]"}`, WantCode: 1, WantStderr: `a is an object, not an array`},
		{Name: "key into array", Stdin: `{"document":` + doc + `,"path":"a.b.c"}`, WantCode: 1, WantStderr: `a.b is an array, not an object`},
		{Name: "step into scalar", Stdin: `{"document":` + doc + `,"path":"a.b[0].c.d"}`, WantCode: 1, WantStderr: `a.b[0].c is a number, which has no .d`},
		{Name: "invalid json", Stdin: `{"document":`, WantCode: 2, WantStderr: "jsonq: invalid input"},
		{Name: "missing document", Stdin: `{"path":"a"}`, WantCode: 2, WantStderr: `missing required field "document"`},
		{Name: "missing path", Stdin: `{"document":{}}`, WantCode: 2, WantStderr: `missing required string field "path"`},
		{Name: "string document not json", Stdin: `{"document":"hello","path":""}`, WantCode: 2, WantStderr: "document is a string but not JSON text"},
		{Name: "empty key", Stdin: `{"document":{},"path":"a..b"}`, WantCode: 2, WantStderr: "empty key"},
		{Name: "trailing dot", Stdin: `{"document":{},"path":"a."}`, WantCode: 2, WantStderr: "path ends with '.'"},
		{Name: "negative index", Stdin: `{"document":[1],"path":"[-1]"}`, WantCode: 2, WantStderr: "not a non-negative integer"},
		{Name: "unterminated bracket", Stdin: `{"document":[1],"path":"[0"}`, WantCode: 2, WantStderr: "missing ']'"},
		{Name: "bracket after dot", Stdin: `{"document":{"a":[1]},"path":"a.[0]"}`, WantCode: 2, WantStderr: "'[' after '.'"},
	})
}

package main

import (
	"testing"

	"github.com/awaken-dev/awaken/examples/sandbox-tools/internal/tooltest"
)

func TestRun(t *testing.T) {
	tooltest.Run(t, run, []tooltest.Case{
		{Name: "empty text", Stdin: `{"text":""}`, WantStdout: `{"lines":0,"words":0,"bytes":0}`},
		{Name: "no trailing newline", Stdin: `{"text":"hello world"}`, WantStdout: `{"lines":0,"words":2,"bytes":11}`},
		{Name: "lines count newlines", Stdin: `{"text":"a b\nc\n\n"}`, WantStdout: `{"lines":3,"words":3,"bytes":7}`},
		{Name: "runs of white space", Stdin: `{"text":"  a\t\tb  \r\n c "}`, WantStdout: `{"lines":1,"words":3,"bytes":13}`},
		{Name: "multibyte counts bytes", Stdin: `{"text":"héllo wörld"}`, WantStdout: `{"lines":0,"words":2,"bytes":13}`},
		{Name: "unicode space separates", Stdin: `{"text":"a\u00a0b\u2003c"}`, WantStdout: `{"lines":0,"words":3,"bytes":8}`},
		{Name: "invalid json", Stdin: `{"text":`, WantCode: 2, WantStderr: "wc: invalid input"},
		{Name: "empty stdin", Stdin: ``, WantCode: 2, WantStderr: "got nothing"},
		{Name: "missing text", Stdin: `{}`, WantCode: 2, WantStderr: `missing required string field "text"`},
		{Name: "text not a string", Stdin: `{"text":3}`, WantCode: 2, WantStderr: "wc: invalid input"},
		{Name: "unknown field", Stdin: `{"text":"a","txt":"b"}`, WantCode: 2, WantStderr: `unknown field "txt"`},
		{Name: "trailing data", Stdin: `{"text":"a"} {}`, WantCode: 2, WantStderr: "unexpected data"},
	})
}

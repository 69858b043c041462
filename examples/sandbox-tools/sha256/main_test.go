package main

import (
	"testing"

	"github.com/awaken-dev/awaken/examples/sandbox-tools/internal/tooltest"
)

func TestRun(t *testing.T) {
	tooltest.Run(t, run, []tooltest.Case{
		// Digests from sha256sum(1).
		{Name: "empty text", Stdin: `{"text":""}`, WantStdout: `{"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`},
		{Name: "abc", Stdin: `{"text":"abc"}`, WantStdout: `{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}`},
		{Name: "utf-8 bytes", Stdin: `{"text":"é"}`, WantStdout: `{"sha256":"4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c"}`},
		{Name: "invalid json", Stdin: `not json`, WantCode: 2, WantStderr: "sha256: invalid input"},
		{Name: "missing text", Stdin: `{"other":1}`, WantCode: 2, WantStderr: `unknown field "other"`},
		{Name: "null text", Stdin: `{"text":null}`, WantCode: 2, WantStderr: `missing required string field "text"`},
	})
}

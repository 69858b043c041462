// Command sha256 is an example awaken sandbox tool that hashes text with SHA-256.
//
// Input on stdin:  {"text": "..."}
// Output on stdout: {"sha256":"<64 lowercase hex digits>"}
//
// The digest is of the UTF-8 bytes of the text. Invalid input exits with status 2 and a
// message on stderr.
//
// Build it for the sandbox with GOOS=wasip1 GOARCH=wasm go build (see
// scripts/build-wasm-tools.sh); it is plain Go and also runs natively.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/awaken-dev/awaken/examples/sandbox-tools/internal/toolio"
)

type input struct {
	Text *string `json:"text"`
}

type output struct {
	SHA256 string `json:"sha256"`
}

func main() { os.Exit(run(os.Stdin, os.Stdout, os.Stderr)) }

func run(stdin io.Reader, stdout, stderr io.Writer) int {
	return toolio.Main("sha256", stdin, stdout, stderr, func(data []byte) (any, error) {
		var in input
		if err := toolio.DecodeStrict(data, &in); err != nil {
			return nil, err
		}
		if in.Text == nil {
			return nil, toolio.Invalid(`missing required string field "text"`)
		}
		sum := sha256.Sum256([]byte(*in.Text))
		return output{SHA256: hex.EncodeToString(sum[:])}, nil
	})
}

// Command wc is an example awaken sandbox tool that counts lines, words and bytes like
// wc(1).
//
// Input on stdin:  {"text": "..."}
// Output on stdout: {"lines":N,"words":N,"bytes":N}
//
// lines is the number of '\n' characters, words the number of maximal runs of
// non-space characters (Unicode white space separates words), bytes the UTF-8 length of
// the text. Invalid input exits with status 2 and a message on stderr.
//
// Build it for the sandbox with GOOS=wasip1 GOARCH=wasm go build (see
// scripts/build-wasm-tools.sh); it is plain Go and also runs natively.
package main

import (
	"io"
	"os"
	"strings"

	"github.com/awaken-dev/awaken/examples/sandbox-tools/internal/toolio"
)

type input struct {
	Text *string `json:"text"`
}

type output struct {
	Lines int `json:"lines"`
	Words int `json:"words"`
	Bytes int `json:"bytes"`
}

func main() { os.Exit(run(os.Stdin, os.Stdout, os.Stderr)) }

func run(stdin io.Reader, stdout, stderr io.Writer) int {
	return toolio.Main("wc", stdin, stdout, stderr, func(data []byte) (any, error) {
		var in input
		if err := toolio.DecodeStrict(data, &in); err != nil {
			return nil, err
		}
		if in.Text == nil {
			return nil, toolio.Invalid(`missing required string field "text"`)
		}
		return count(*in.Text), nil
	})
}

// count measures text the way wc(1) does.
func count(text string) output {
	return output{
		Lines: strings.Count(text, "\n"),
		Words: len(strings.Fields(text)),
		Bytes: len(text),
	}
}

// Command jsonq is an example awaken sandbox tool that extracts one value from a JSON
// document by path.
//
// Input on stdin:  {"document": <any JSON value, or a string holding JSON text>,
//
//	"path": "a.b[0].c"}
//
// Output on stdout: the value at the path, as JSON.
//
// A string document is parsed as JSON text, so a document that arrives serialised
// (a common habit of language models) works the same as an inline one. The path is a
// sequence of object keys separated by '.' and array indices in brackets; a key that
// contains '.', '[' or ']' is written as a quoted JSON string in brackets, e.g.
// `a["dotted.key"][2]`. The empty path selects the whole document.
//
// A path that does not exist in the document exits with status 1 and says where it
// stopped; invalid input (including a malformed path) exits with status 2. Both write
// the message to stderr.
//
// Build it for the sandbox with GOOS=wasip1 GOARCH=wasm go build (see
// scripts/build-wasm-tools.sh); it is plain Go and also runs natively.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/awaken-dev/awaken/examples/sandbox-tools/internal/toolio"
)

type input struct {
	Document json.RawMessage `json:"document"`
	Path     *string         `json:"path"`
}

func main() { os.Exit(run(os.Stdin, os.Stdout, os.Stderr)) }

func run(stdin io.Reader, stdout, stderr io.Writer) int {
	return toolio.Main("jsonq", stdin, stdout, stderr, func(data []byte) (any, error) {
		var in input
		if err := toolio.DecodeStrict(data, &in); err != nil {
			return nil, err
		}
		if in.Document == nil {
			return nil, toolio.Invalid(`missing required field "document"`)
		}
		if in.Path == nil {
			return nil, toolio.Invalid(`missing required string field "path"`)
		}
		doc, err := parseDocument(in.Document)
		if err != nil {
			return nil, err
		}
		steps, err := parsePath(*in.Path)
		if err != nil {
			return nil, err
		}
		return lookup(doc, steps)
	})
}

// parseDocument decodes the document, unwrapping one level of JSON-in-a-string.
func parseDocument(raw json.RawMessage) (any, error) {
	var doc any
	if err := decodeValue(raw, &doc); err != nil {
		return nil, toolio.Invalid("document: %v", err)
	}
	if text, ok := doc.(string); ok {
		var inner any
		if err := decodeValue([]byte(text), &inner); err != nil {
			return nil, toolio.Invalid("document is a string but not JSON text: %v", err)
		}
		return inner, nil
	}
	return doc, nil
}

// decodeValue decodes exactly one JSON value, keeping numbers exact.
func decodeValue(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// step is one path element: an object key or an array index.
type step struct {
	key     string
	index   int
	isIndex bool
}

func (s step) String() string {
	if s.isIndex {
		return "[" + strconv.Itoa(s.index) + "]"
	}
	if s.key == "" || strings.ContainsAny(s.key, ".[]") {
		q, _ := json.Marshal(s.key)
		return "[" + string(q) + "]"
	}
	return "." + s.key
}

// render writes steps back as a path, for messages.
func render(steps []step) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.String())
	}
	return strings.TrimPrefix(b.String(), ".")
}

// parsePath parses the path grammar described in the package comment.
func parsePath(path string) ([]step, error) {
	var steps []step
	i := 0
	bad := func(format string, args ...any) error {
		return toolio.Invalid("path %q at offset %d: %s", path, i, fmt.Sprintf(format, args...))
	}
	expectKey := true // at the start or after '.'
	afterDot := false
	for i < len(path) {
		switch c := path[i]; {
		case c == '.':
			if expectKey {
				return nil, bad("empty key")
			}
			expectKey, afterDot = true, true
			i++
		case c == '[':
			if afterDot {
				return nil, bad("'[' after '.'; write a[0] or a[\"key\"]")
			}
			end, s, err := parseBracket(path, i)
			if err != nil {
				return nil, bad("%v", err)
			}
			steps = append(steps, s)
			i = end
			expectKey = false
		case c == ']':
			return nil, bad("unexpected ']'")
		default:
			if !expectKey {
				return nil, bad("expected '.' or '['")
			}
			start := i
			for i < len(path) && !strings.ContainsRune(".[]", rune(path[i])) {
				i++
			}
			steps = append(steps, step{key: path[start:i]})
			expectKey, afterDot = false, false
		}
	}
	if afterDot && expectKey {
		return nil, bad("path ends with '.'")
	}
	return steps, nil
}

// parseBracket parses "[N]" or "[\"key\"]" starting at path[i] == '['.
func parseBracket(path string, i int) (int, step, error) {
	body := path[i+1:]
	if strings.HasPrefix(body, `"`) {
		dec := json.NewDecoder(strings.NewReader(body))
		var key string
		if err := dec.Decode(&key); err != nil {
			return 0, step{}, fmt.Errorf("quoted key: %v", err)
		}
		n := int(dec.InputOffset())
		if n >= len(body) || body[n] != ']' {
			return 0, step{}, errors.New("missing ']' after quoted key")
		}
		return i + 1 + n + 1, step{key: key}, nil
	}
	end := strings.IndexByte(body, ']')
	if end < 0 {
		return 0, step{}, errors.New("missing ']'")
	}
	digits := body[:end]
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || digits == "" || digits[0] == '+' || (len(digits) > 1 && digits[0] == '0') {
		return 0, step{}, fmt.Errorf("index %q is not a non-negative integer", digits)
	}
	return i + 1 + end + 1, step{index: n, isIndex: true}, nil
}

// lookup walks steps through doc. A missing key, an index out of range or a step into
// a scalar is a plain error (exit status 1) naming where the walk stopped.
func lookup(doc any, steps []step) (any, error) {
	cur := doc
	for n, s := range steps {
		at := render(steps[:n])
		if at == "" {
			at = "the document root"
		}
		switch v := cur.(type) {
		case map[string]any:
			if s.isIndex {
				return nil, fmt.Errorf("path %s: %s is an object, not an array", render(steps), at)
			}
			next, ok := v[s.key]
			if !ok {
				return nil, fmt.Errorf("path %s: key %q not found in %s", render(steps), s.key, at)
			}
			cur = next
		case []any:
			if !s.isIndex {
				return nil, fmt.Errorf("path %s: %s is an array, not an object", render(steps), at)
			}
			if s.index >= len(v) {
				return nil, fmt.Errorf("path %s: index %d out of range in %s (length %d)", render(steps), s.index, at, len(v))
			}
			cur = v[s.index]
		default:
			return nil, fmt.Errorf("path %s: %s is %s, which has no %s", render(steps), at, kindOf(v), s)
		}
	}
	return cur, nil
}

// kindOf names the JSON type of a decoded scalar.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

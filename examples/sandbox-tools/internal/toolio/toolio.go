// Package toolio is the shared calling convention of awaken's example sandbox tools:
// the tool's JSON arguments arrive on stdin, its JSON result leaves on stdout, and
// failures are reported on stderr with an exit status the engine turns into an error.
//
// The helpers are plain Go, so the tools build and test on the host as well as for
// GOOS=wasip1 GOARCH=wasm.
package toolio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Exit statuses of a tool.
const (
	// ExitOK: the result is on stdout.
	ExitOK = 0
	// ExitFailure: the input was valid but the tool could not produce a result (for
	// example a path that does not exist in the document).
	ExitFailure = 1
	// ExitInvalidInput: the arguments are not what the tool accepts.
	ExitInvalidInput = 2
)

// InputError marks an error caused by the tool's arguments; Main maps it to
// ExitInvalidInput.
type InputError struct{ Err error }

// Error describes the invalid input.
func (e *InputError) Error() string { return "invalid input: " + e.Err.Error() }

// Unwrap exposes the cause.
func (e *InputError) Unwrap() error { return e.Err }

// Invalid formats an InputError.
func Invalid(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// DecodeStrict decodes exactly one JSON object from data into v, rejecting unknown
// fields and trailing data, so a misspelt argument is an error rather than a silent
// default. Errors are *InputError.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return Invalid("expected a JSON object on stdin, got nothing")
		}
		return &InputError{Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Invalid("unexpected data after the JSON object")
	}
	return nil
}

// Main runs a tool: it reads all of stdin, calls fn with it, writes fn's result to
// stdout as one line of JSON and returns the exit status. An *InputError from fn yields
// ExitInvalidInput, any other error ExitFailure, each with a message on stderr.
func Main(name string, stdin io.Reader, stdout, stderr io.Writer, fn func(input []byte) (any, error)) int {
	input, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "%s: read stdin: %v\n", name, err)
		return ExitFailure
	}
	result, err := fn(input)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		var inputErr *InputError
		if errors.As(err, &inputErr) {
			return ExitInvalidInput
		}
		return ExitFailure
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(result); err != nil {
		fmt.Fprintf(stderr, "%s: write result: %v\n", name, err)
		return ExitFailure
	}
	return ExitOK
}

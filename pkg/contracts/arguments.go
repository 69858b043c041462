package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// This file reads a call's raw arguments into the object every later stage sees. Decoding
// them into a typed tool's parameters (checked against the schema derived from the type) is
// the tool registry's, internal/toolreg, which checks them with the module's one JSON Schema
// validator.

// NormalizeCallArguments is how a submission's call arguments are read. Providers send
// them in two shapes: a JSON object (Anthropic's tool_use input, awaken's own form) or a
// string holding one (OpenAI's function arguments). Empty, null, "" and a string of
// whitespace mean {}; a string holding a JSON object is replaced by that object (its
// bytes as the string holds them), so a policy, the executor and the hash all see the
// object; any other JSON value is returned unchanged.
//
// A string that does not hold one JSON object (truncated JSON, an array, trailing data, a
// key repeated in one object, nesting deeper than [MaxJSONDepth]) is the model's mistake in
// that one call, not a malformed batch: NormalizeCallArguments returns raw unchanged with
// a [*ToolError] of kind [ToolErrorInvalidArguments]. The decoder keeps the string, and the
// gate completes that call with the error as its model-visible result while the rest of
// the batch runs (see [ArgumentsError]).
func NormalizeCallArguments(raw json.RawMessage) (json.RawMessage, *ToolError) {
	a := bytes.TrimSpace(raw)
	if len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	if a[0] != '"' {
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(a, &s); err != nil {
		return raw, InvalidArguments("arguments are not valid JSON: " + err.Error())
	}
	inner := bytes.TrimSpace([]byte(s))
	if len(inner) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if err := checkArgumentObject(inner); err != nil {
		return raw, err
	}
	return json.RawMessage(inner), nil
}

// ArgumentsError reports why a recorded call's arguments cannot be handed to any tool: they
// are a string that [NormalizeCallArguments] could not turn into an object. It is nil for
// every other value, whose fit is the tool's schema's to judge.
func ArgumentsError(raw json.RawMessage) *ToolError {
	_, err := NormalizeCallArguments(raw)
	return err
}

// checkArgumentObject checks that doc (the text of a string argument) is exactly one JSON
// object, held to the envelope's own rules for objects: bounded nesting and no repeated key.
func checkArgumentObject(doc []byte) *ToolError {
	const what = "arguments are a string that does not hold a JSON object: "
	if depth := jsonNestingDepth(doc, MaxJSONDepth); depth > MaxJSONDepth {
		return InvalidArguments(fmt.Sprintf(what+"it nests deeper than %d", MaxJSONDepth))
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return InvalidArguments(what + err.Error())
	}
	if _, err := dec.Token(); err == nil {
		return InvalidArguments(what + "trailing data after the JSON value")
	} else if !errors.Is(err, io.EOF) {
		return InvalidArguments(what + err.Error())
	}
	if v[0] != '{' {
		return InvalidArguments(what + "it holds " + jsonKind(v[0]))
	}
	if rej := scanWireKeys(doc, nil); rej != nil {
		return InvalidArguments(what + strings.Replace(rej.Message, "payload", "it", 1))
	}
	return nil
}

// jsonKind names the JSON type a value starting with c has.
func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

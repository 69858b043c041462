package contracts

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// This file holds the deep copies and the value equality the transitions rely on: a
// committed output never shares memory with its caller, and "the same output" (an
// idempotent redelivery) is judged by value, with JSON compared canonically.

// Deep copies. They keep the nil/empty distinction of slices so a copy encodes exactly
// like its original.

func batchCloneOutput(o ToolOutput) ToolOutput {
	o.Content = batchCloneBlocks(o.Content)
	o.StructuredContent = batchCloneRaw(o.StructuredContent)
	o.State = batchCloneCommands(o.State)
	return o
}

func batchCloneBlocks(bs []ContentBlock) []ContentBlock {
	if bs == nil {
		return nil
	}
	out := make([]ContentBlock, len(bs))
	for i, b := range bs {
		if b.Source != nil {
			s := *b.Source
			b.Source = &s
		}
		if b.Resource != nil {
			r := *b.Resource
			b.Resource = &r
		}
		b.Input = batchCloneRaw(b.Input)
		b.Content = batchCloneBlocks(b.Content)
		out[i] = b
	}
	return out
}

func batchCloneCommands(cs []Command) []Command {
	if cs == nil {
		return nil
	}
	out := make([]Command, len(cs))
	for i, c := range cs {
		c.Action.Value = batchCloneRaw(c.Action.Value)
		out[i] = c
	}
	return out
}

func batchCloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage{}, r...)
}

// Equality. "Equal output" is deep equality of every field, with raw JSON compared
// canonically (key order, whitespace and number spelling do not matter) and a nil slice
// equal to an empty one, as in the original where both are the same Vec.

func batchOutputEqual(a, b ToolOutput) bool {
	return a.CallID == b.CallID && a.IsError == b.IsError &&
		batchBlocksEqual(a.Content, b.Content) && batchOptionalJSONEqual(a.StructuredContent, b.StructuredContent) &&
		batchCommandsEqual(a.State, b.State)
}

func batchBlocksEqual(a, b []ContentBlock) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Type != y.Type || x.Text != y.Text || x.ID != y.ID || x.Name != y.Name || x.ToolUseID != y.ToolUseID ||
			x.URI != y.URI || x.MimeType != y.MimeType || x.Size != y.Size || x.Title != y.Title || x.Description != y.Description {
			return false
		}
		if (x.Resource == nil) != (y.Resource == nil) || (x.Resource != nil && *x.Resource != *y.Resource) {
			return false
		}
		if (x.Source == nil) != (y.Source == nil) || (x.Source != nil && *x.Source != *y.Source) {
			return false
		}
		if !batchOptionalJSONEqual(x.Input, y.Input) || !batchBlocksEqual(x.Content, y.Content) {
			return false
		}
	}
	return true
}

func batchCommandsEqual(a, b []Command) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Key != y.Key || x.Scope != y.Scope || x.Merge != y.Merge || x.RunID != y.RunID || x.Action.Kind != y.Action.Kind {
			return false
		}
		if !batchOptionalJSONEqual(x.Action.Value, y.Action.Value) {
			return false
		}
	}
	return true
}

// batchOptionalJSONEqual compares an omitempty raw field: absent equals only absent.
func batchOptionalJSONEqual(a, b json.RawMessage) bool {
	if (len(a) == 0) != (len(b) == 0) {
		return false
	}
	return batchJSONEqual(a, b)
}

// batchJSONEqual reports whether a and b are the same JSON value: objects compare by key
// set (order-free), arrays element-wise, numbers by exact decimal value (1, 1.0 and 1e0
// are equal; no float rounding), strings after unescaping. Empty input counts as null.
// If either side is not valid JSON, only byte-identical inputs are equal.
func batchJSONEqual(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 {
		a = json.RawMessage("null")
	}
	if len(b) == 0 {
		b = json.RawMessage("null")
	}
	if bytes.Equal(a, b) {
		return true
	}
	va, okA := batchDecodeAny(a)
	vb, okB := batchDecodeAny(b)
	if !okA || !okB {
		return false
	}
	return batchValueEqual(va, vb)
}

func batchDecodeAny(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

func batchValueEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && batchNumberEqual(string(x), string(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !batchValueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !batchValueEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// batchNumberEqual compares two JSON number literals by exact decimal value.
func batchNumberEqual(a, b string) bool {
	if a == b {
		return true
	}
	na, da, ea, okA := batchDecimal(a)
	nb, db, eb, okB := batchDecimal(b)
	if !okA || !okB {
		return false
	}
	return na == nb && da == db && ea == eb
}

// batchDecimal normalises a JSON number literal to sign, significant digits (no leading or
// trailing zeros) and a decimal exponent. Zero normalises to (false, "", 0) whatever its
// spelling. ok is false when the exponent does not fit an int64.
func batchDecimal(s string) (neg bool, digits string, exp int64, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
	}
	if expPart != "" {
		e, err := strconv.ParseInt(expPart, 10, 64)
		if err != nil {
			return false, "", 0, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if exp < math.MinInt64+int64(len(frac)) {
		return false, "", 0, false
	}
	exp -= int64(len(frac))
	digits = strings.TrimLeft(intPart+frac, "0")
	for strings.HasSuffix(digits, "0") {
		if exp == math.MaxInt64 {
			return false, "", 0, false
		}
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return false, "", 0, true
	}
	return neg, digits, exp, true
}

package contracts

import (
	"encoding/json"
	"strconv"
)

// objectFields splits the JSON object b into its keys and their raw values, in order,
// without a json.Decoder: the strict decoders of stored records (a call's phase, its
// recovery policy) run on every read of a call record, and the decoder's tokens cost more
// than the rest of the read. It reports false for anything it does not read plainly — not
// a valid JSON object, an escape in a key — and the caller then takes its general path, so
// it decides nothing the general path would decide otherwise.
func objectFields(b []byte) (keys []string, vals [][]byte, ok bool) {
	if !json.Valid(b) {
		return nil, nil, false
	}
	return validObjectFields(b)
}

// validObjectFields is [objectFields] of a value of a valid JSON document (one that
// objectFields returned).
func validObjectFields(b []byte) (keys []string, vals [][]byte, ok bool) {
	if len(b) < 2 || b[0] != '{' {
		return nil, nil, false
	}
	i := skipSpace(b, 1)
	if b[i] == '}' {
		return nil, nil, i == len(b)-1
	}
	for {
		// A key: a string without escapes.
		if b[i] != '"' {
			return nil, nil, false
		}
		j := i + 1
		for b[j] != '"' {
			if b[j] == '\\' {
				return nil, nil, false
			}
			j++
		}
		key := string(b[i+1 : j])
		i = skipSpace(b, j+1)
		if b[i] != ':' {
			return nil, nil, false
		}
		start := skipSpace(b, i+1)
		end := skipValue(b, start)
		keys, vals = append(keys, key), append(vals, b[start:end])
		i = skipSpace(b, end)
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return keys, vals, i == len(b)-1
		default:
			return nil, nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that starts at b[i], in a valid document.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// fieldsWithin reports whether keys has no duplicate, holds every one of required and
// nothing outside required and optional: what [batchDecodeObject] checks.
func fieldsWithin(keys []string, required, optional []string) bool {
	for i, k := range keys {
		known := false
		for _, r := range required {
			known = known || r == k
		}
		for _, o := range optional {
			known = known || o == k
		}
		if !known {
			return false
		}
		for _, prev := range keys[:i] {
			if prev == k {
				return false
			}
		}
	}
	for _, r := range required {
		found := false
		for _, k := range keys {
			found = found || k == r
		}
		if !found {
			return false
		}
	}
	return true
}

// plainString is the value of the JSON string v when it holds no escape.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c == '"' {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// plainUint16 is the JSON number v when it is an integer that fits a uint16.
func plainUint16(v []byte) (uint16, bool) {
	n, err := strconv.ParseUint(string(v), 10, 16)
	return uint16(n), err == nil
}

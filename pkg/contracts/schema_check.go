package contracts

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// This file checks a decoded JSON value against a derived schema node, naming the
// offending field in the error.

// check validates a value decoded with UseNumber against n. path names the value for
// error messages ("" is the arguments object itself).
func (n *schemaNode) check(v any, path string) error {
	if n.custom != nil || len(n.types) == 0 {
		return nil
	}
	where := func() string {
		if path == "" {
			return "arguments"
		}
		return fmt.Sprintf("field %q", path)
	}
	mismatch := func(got string) error {
		return fmt.Errorf("%s: want %s, got %s", where(), n.typeName(), got)
	}
	switch x := v.(type) {
	case nil:
		return mismatch("null")
	case bool:
		if !slices.Contains(n.types, "boolean") {
			return mismatch("boolean")
		}
		if n.enum != nil && !slices.Contains(n.enum, any(x)) {
			return fmt.Errorf("%s: %v is not one of %s", where(), x, renderEnum(n.enum))
		}
	case string:
		if !slices.Contains(n.types, "string") {
			return mismatch("string")
		}
		runes := utf8.RuneCountInString(x)
		if n.minLength != nil && runes < *n.minLength {
			return fmt.Errorf("%s: shorter than %d characters", where(), *n.minLength)
		}
		if n.maxLength != nil && runes > *n.maxLength {
			return fmt.Errorf("%s: longer than %d characters", where(), *n.maxLength)
		}
		if n.pattern != nil && !n.pattern.MatchString(x) {
			return fmt.Errorf("%s: does not match pattern %s", where(), n.pattern)
		}
		if n.enum != nil && !slices.Contains(n.enum, any(x)) {
			return fmt.Errorf("%s: %q is not one of %s", where(), x, renderEnum(n.enum))
		}
	case json.Number:
		return n.checkNumber(x, where, mismatch)
	case []any:
		if !slices.Contains(n.types, "array") {
			return mismatch("array")
		}
		if n.minItems != nil && len(x) < *n.minItems {
			return fmt.Errorf("%s: fewer than %d items", where(), *n.minItems)
		}
		if n.maxItems != nil && len(x) > *n.maxItems {
			return fmt.Errorf("%s: more than %d items", where(), *n.maxItems)
		}
		if n.uniqueItems {
			seen := make(map[string]bool, len(x))
			for i, item := range x {
				key, _ := json.Marshal(item)
				if seen[string(key)] {
					return fmt.Errorf("%s: item %d is a duplicate", where(), i)
				}
				seen[string(key)] = true
			}
		}
		if n.items != nil {
			for i, item := range x {
				if err := n.items.check(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		if !slices.Contains(n.types, "object") {
			return mismatch("object")
		}
		return n.checkObject(x, path)
	default:
		return mismatch(fmt.Sprintf("%T", v))
	}
	return nil
}

func (n *schemaNode) checkNumber(x json.Number, where func() string, mismatch func(string) error) error {
	isInt := !strings.ContainsAny(string(x), ".eE")
	switch {
	case slices.Contains(n.types, "number"):
	case slices.Contains(n.types, "integer"):
		if !isInt {
			return fmt.Errorf("%s: want integer, got %s", where(), x)
		}
	default:
		return mismatch("number")
	}
	val, ok := new(big.Rat).SetString(string(x))
	if !ok {
		return fmt.Errorf("%s: %s is not a number", where(), x)
	}
	if n.minimum != nil && val.Cmp(n.minimum.val) < 0 {
		return fmt.Errorf("%s: %s is less than the minimum %s", where(), x, n.minimum.lit)
	}
	if n.maximum != nil && val.Cmp(n.maximum.val) > 0 {
		return fmt.Errorf("%s: %s is greater than the maximum %s", where(), x, n.maximum.lit)
	}
	if n.exclMinimum != nil && val.Cmp(n.exclMinimum.val) <= 0 {
		return fmt.Errorf("%s: %s is not greater than %s", where(), x, n.exclMinimum.lit)
	}
	if n.exclMaximum != nil && val.Cmp(n.exclMaximum.val) >= 0 {
		return fmt.Errorf("%s: %s is not less than %s", where(), x, n.exclMaximum.lit)
	}
	if n.enum != nil {
		for _, e := range n.enum {
			if en, ok := e.(json.Number); ok {
				if ev, ok := new(big.Rat).SetString(string(en)); ok && ev.Cmp(val) == 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("%s: %s is not one of %s", where(), x, renderEnum(n.enum))
	}
	return nil
}

func (n *schemaNode) checkObject(x map[string]any, path string) error {
	child := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	if n.properties != nil {
		for _, name := range n.required {
			v, present := x[name]
			if !present {
				return fmt.Errorf("missing required field %q", child(name))
			}
			if v == nil && len(n.properties[name].types) != 0 {
				return fmt.Errorf("required field %q cannot be null", child(name))
			}
		}
	}
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := x[k]
		if prop, ok := n.properties[k]; ok {
			if v == nil && !slices.Contains(n.required, k) {
				continue // an optional field may be null: it means absent
			}
			if err := prop.check(v, child(k)); err != nil {
				return err
			}
			continue
		}
		if n.closed {
			return fmt.Errorf("unknown field %q", child(k))
		}
		if n.additional != nil {
			if err := n.additional.check(v, child(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func renderEnum(enum []any) string {
	b, _ := json.Marshal(enum)
	return string(b)
}

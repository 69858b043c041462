package typeschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// The `jsonschema` and `desc` struct tags: their grammar and how they refine a node.

// schemaTag is the parsed `jsonschema` and `desc` tags of one field.
type schemaTag struct {
	description, format, pattern, def  string
	hasDefault                         bool
	enum                               []string
	minimum, maximum, exclMin, exclMax string
	minLength, maxLength               *int
	minItems, maxItems                 *int
	uniqueItems, required, optional    bool
}

func parseSchemaTag(tag reflect.StructTag) (schemaTag, error) {
	var st schemaTag
	desc, hasDesc := tag.Lookup("desc")
	st.description = desc
	raw := tag.Get("jsonschema")
	if raw == "" {
		return st, nil
	}
	// The keywords by the kind of value they take; description, enum and default are read
	// on their own below.
	texts := map[string]*string{
		"format": &st.format, "pattern": &st.pattern,
		"minimum": &st.minimum, "maximum": &st.maximum,
		"exclusiveMinimum": &st.exclMin, "exclusiveMaximum": &st.exclMax,
	}
	counts := map[string]**int{
		"minLength": &st.minLength, "maxLength": &st.maxLength,
		"minItems": &st.minItems, "maxItems": &st.maxItems,
	}
	flags := map[string]*bool{"uniqueItems": &st.uniqueItems, "required": &st.required, "optional": &st.optional}
	for _, part := range splitUnescaped(raw) {
		key, value, hasValue := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		_, isFlag := flags[key]
		switch {
		case key == "description":
			if hasDesc {
				return st, errors.New("both a desc tag and a jsonschema description")
			}
			st.description = value
		case key == "enum":
			st.enum = strings.Split(value, "|")
		case key == "default":
			st.def, st.hasDefault = value, true
		case texts[key] != nil:
			*texts[key] = value
		case counts[key] != nil:
			v, err := strconv.Atoi(value)
			if err != nil || v < 0 {
				return st, fmt.Errorf("jsonschema %s=%q is not a non-negative integer", key, value)
			}
			*counts[key] = &v
		case isFlag:
			*flags[key] = true
		default:
			return st, fmt.Errorf("unknown jsonschema keyword %q", key)
		}
		if isFlag == hasValue {
			if isFlag {
				return st, fmt.Errorf("jsonschema keyword %q takes no value", key)
			}
			return st, fmt.Errorf("jsonschema keyword %q needs a value", key)
		}
	}
	return st, nil
}

// splitUnescaped splits s on commas not preceded by a backslash and unescapes "\,".
func splitUnescaped(s string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ',':
			cur.WriteByte(',')
			i++
		case s[i] == ',':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(parts, cur.String())
}

// apply sets the keywords of st on node. Value keywords of a slice of scalars go to its
// items; array keywords stay on the array.
func (st schemaTag) apply(node *schemaNode) error {
	node.description = st.description
	if st.uniqueItems || st.minItems != nil || st.maxItems != nil {
		if node.typeName() != "array" {
			return errors.New("minItems, maxItems and uniqueItems need a slice or array field")
		}
		node.uniqueItems = node.uniqueItems || st.uniqueItems
		if st.minItems != nil {
			node.minItems = st.minItems
		}
		if st.maxItems != nil {
			node.maxItems = st.maxItems
		}
	}
	target := node
	if node.typeName() == "array" && node.items != nil && node.items.properties == nil && node.items.items == nil {
		target = node.items
	}
	kind := target.typeName()
	if target.custom != nil {
		kind = "custom"
	}
	if st.enum != nil || st.hasDefault {
		if kind != "string" && kind != "integer" && kind != "number" && kind != "boolean" {
			return fmt.Errorf("enum and default need a scalar field, not %s", kind)
		}
		for _, e := range st.enum {
			v, err := scalarValue(kind, e)
			if err != nil {
				return fmt.Errorf("enum: %w", err)
			}
			target.enum = append(target.enum, v)
		}
		if st.hasDefault {
			if target != node {
				return errors.New("default needs a scalar field, not a slice")
			}
			v, err := scalarValue(kind, st.def)
			if err != nil {
				return fmt.Errorf("default: %w", err)
			}
			node.def = v
		}
	}
	if st.format != "" || st.pattern != "" || st.minLength != nil || st.maxLength != nil {
		if kind != "string" {
			return fmt.Errorf("format, pattern, minLength and maxLength need a string field, not %s", kind)
		}
		if st.format != "" {
			target.format = st.format
		}
		if st.pattern != "" {
			re, err := regexp.Compile(st.pattern)
			if err != nil {
				return fmt.Errorf("pattern: %w", err)
			}
			target.pattern = re
		}
		if st.minLength != nil {
			target.minLength = st.minLength
		}
		if st.maxLength != nil {
			target.maxLength = st.maxLength
		}
	}
	numeric := []struct {
		name string
		lit  string
		dst  **bound
		up   bool // an upper bound: keep the smaller of tag and type bound
	}{
		{"minimum", st.minimum, &target.minimum, false},
		{"maximum", st.maximum, &target.maximum, true},
		{"exclusiveMinimum", st.exclMin, &target.exclMinimum, false},
		{"exclusiveMaximum", st.exclMax, &target.exclMaximum, true},
	}
	for _, nb := range numeric {
		if nb.lit == "" {
			continue
		}
		if kind != "integer" && kind != "number" {
			return fmt.Errorf("%s needs a numeric field, not %s", nb.name, kind)
		}
		bd, err := parseBound(nb.lit)
		if err != nil {
			return fmt.Errorf("%s: %w", nb.name, err)
		}
		if cur := *nb.dst; cur == nil || (nb.up && bd.val.Cmp(cur.val) < 0) || (!nb.up && bd.val.Cmp(cur.val) > 0) {
			*nb.dst = bd
		}
	}
	return nil
}

// scalarValue parses a tag literal as a JSON value of kind.
func scalarValue(kind, s string) (any, error) {
	switch kind {
	case "string":
		return s, nil
	case "boolean":
		v, err := strconv.ParseBool(s)
		if err != nil || (s != "true" && s != "false") {
			return nil, fmt.Errorf("%q is not true or false", s)
		}
		return v, nil
	case "integer":
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			if _, uerr := strconv.ParseUint(s, 10, 64); uerr != nil {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
		}
		return json.Number(s), nil
	default: // number
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("%q is not a JSON number", s)
		}
		return json.Number(s), nil
	}
}

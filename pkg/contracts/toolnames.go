package contracts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// MaxProviderToolName is the longest tool name the model providers accept: OpenAI and
// Anthropic both require ^[a-zA-Z0-9_-]{1,64}$.
const MaxProviderToolName = 64

// SafeToolName is the provider-safe name of tool id: the id itself when it already is at
// most 64 characters of [a-zA-Z0-9_-]; otherwise the id with every other character turned
// into '_', cut to 55 bytes, then "_" and the first 8 hex digits of the SHA-256 of the id
// ("mcp__everything__greet (structured)" → "mcp__everything__greet__structured_" + "_" +
// hash). It is a pure function of the id, so the name is the same on every start and in
// every process; the hash keeps two ids that sanitize alike apart. The catalog lists the
// mapping and a submission may name a tool by it ([ResolveToolName]).
func SafeToolName(id string) string {
	if providerSafe(id) {
		return id
	}
	b := make([]byte, 0, len(id))
	for i := 0; i < len(id); i++ {
		c := id[i]
		if safeNameByte(c) {
			b = append(b, c)
		} else if c < 0x80 || c >= 0xC0 { // one '_' per character, not per UTF-8 byte
			b = append(b, '_')
		}
	}
	const keep = MaxProviderToolName - 9
	if len(b) > keep {
		b = b[:keep]
	}
	sum := sha256.Sum256([]byte(id))
	return string(b) + "_" + hex.EncodeToString(sum[:4])
}

// ResolveToolName returns the tool id among ids that name stands for: name itself when it
// is one of ids, else the id whose [SafeToolName] is name. ok is false when none is.
func ResolveToolName(name string, ids func(yield func(string) bool)) (id string, ok bool) {
	for candidate := range ids {
		if candidate == name {
			return candidate, true
		}
		if !ok && SafeToolName(candidate) == name && candidate != name {
			id, ok = candidate, true
		}
	}
	return id, ok
}

func providerSafe(id string) bool {
	if id == "" || len(id) > MaxProviderToolName {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !safeNameByte(id[i]) {
			return false
		}
	}
	return true
}

func safeNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// strictUnsupported are the JSON Schema keywords OpenAI's strict mode refuses.
var strictUnsupported = []string{
	"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "oneOf",
	"patternProperties", "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties",
}

// StrictSchema returns the strict variant of a tool's parameters schema, as OpenAI's
// strict function calling requires it: every object closed (additionalProperties false)
// and every property of it required. It fails, with the reason, where the schema does not
// allow that without changing what it accepts: a schema that declares no properties (any
// object), an object that allows properties it does not declare (additionalProperties true
// or a schema), or a keyword strict mode does not support (allOf, oneOf, not,
// patternProperties, …). Making an optional property required is the one change it makes:
// the model must then always send it.
func StrictSchema(params json.RawMessage) (json.RawMessage, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("parameters are not JSON: %v", err)
	}
	m, ok := root.(map[string]any)
	if ok && len(m) == 0 {
		return nil, fmt.Errorf("the tool declares no parameters schema: any object is accepted, which a closed schema would refuse")
	}
	if !ok || m["type"] != "object" {
		return nil, fmt.Errorf("the parameters schema is not of type object")
	}
	if err := strictNode(m, "parameters"); err != nil {
		return nil, err
	}
	return typeschema.Marshal(m)
}

func strictNode(n map[string]any, path string) error {
	for _, k := range strictUnsupported {
		if _, ok := n[k]; ok {
			return fmt.Errorf("%s uses %q, which strict mode does not support", path, k)
		}
	}
	isObject := n["type"] == "object"
	if ts, ok := n["type"].([]any); ok {
		isObject = slices.Contains(ts, any("object"))
	}
	if _, ok := n["properties"]; ok {
		isObject = true
	}
	if isObject {
		props, ok := n["properties"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s declares no properties: it accepts any object, which a closed schema would refuse", path)
		}
		if ap, set := n["additionalProperties"]; set && ap != false {
			return fmt.Errorf("%s allows properties it does not declare (additionalProperties)", path)
		}
		n["additionalProperties"] = false
		required := make([]string, 0, len(props))
		for name := range props {
			required = append(required, name)
		}
		sort.Strings(required)
		n["required"] = required
		for _, name := range required {
			child, ok := props[name].(map[string]any)
			if !ok {
				return fmt.Errorf("%s.%s is not a schema object", path, name)
			}
			if err := strictNode(child, path+"."+name); err != nil {
				return err
			}
		}
	}
	if items, ok := n["items"].(map[string]any); ok {
		if err := strictNode(items, path+"[]"); err != nil {
			return err
		}
	}
	for _, key := range []string{"anyOf"} {
		if list, ok := n[key].([]any); ok {
			for i, s := range list {
				if child, ok := s.(map[string]any); ok {
					if err := strictNode(child, fmt.Sprintf("%s.%s[%d]", path, key, i)); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		if defs, ok := n[key].(map[string]any); ok {
			for name, s := range defs {
				if child, ok := s.(map[string]any); ok {
					if err := strictNode(child, path+"."+key+"."+name); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

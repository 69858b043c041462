package typeschema

import (
	"reflect"
	"slices"
	"strings"
)

// The JSON fields of a struct type, resolved as encoding/json resolves them.

// jsonField is one field of a struct's JSON form, resolved as encoding/json does.
type jsonField struct {
	name     string
	goName   string
	index    []int
	typ      reflect.Type
	tagged   bool
	optional bool
	quoted   bool
	tag      reflect.StructTag
}

// JSONFields returns the fields of struct type t's JSON form by name, with their Go types,
// resolved as encoding/json resolves them (see jsonFields). The vocabulary uses it to name
// the field a wire document gets wrong.
func JSONFields(t reflect.Type) map[string]reflect.Type {
	fields, _ := jsonFields(t)
	m := make(map[string]reflect.Type, len(fields))
	for _, f := range fields {
		m[f.name] = f.typ
	}
	return m
}

// jsonFields lists the JSON fields of struct type t with encoding/json's visibility
// rules: exported fields, json tag names, "-" skipped, untagged embedded structs
// flattened, and among fields of one name the shallowest wins (a tagged one breaking a
// tie, otherwise all of them vanish).
func jsonFields(t reflect.Type) ([]jsonField, error) { return jsonFieldsOfTag(t, "json") }

// jsonFieldsOfTag is [jsonFields] reading the names and options from tag key (a YAML
// document's fields are named by their yaml tags).
func jsonFieldsOfTag(t reflect.Type, key string) ([]jsonField, error) {
	type level struct {
		typ        reflect.Type
		index      []int
		viaPointer bool
	}
	var all []jsonField
	next := []level{{typ: t}}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := next
		next = nil
		for _, lv := range current {
			if visited[lv.typ] {
				continue
			}
			visited[lv.typ] = true
			for i := 0; i < lv.typ.NumField(); i++ {
				sf := lv.typ.Field(i)
				ft := sf.Type
				if sf.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get(key)
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				index := append(slices.Clone(lv.index), i)
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, level{typ: ft, index: index, viaPointer: lv.viaPointer || sf.Type.Kind() == reflect.Pointer})
					continue
				}
				f := jsonField{
					name:   name,
					goName: sf.Name,
					index:  index,
					typ:    sf.Type,
					tagged: name != "",
					tag:    sf.Tag,
				}
				if f.name == "" {
					f.name = sf.Name
				}
				for _, opt := range strings.Split(opts, ",") {
					switch opt {
					case "omitempty", "omitzero":
						f.optional = true
					case "string":
						switch ft.Kind() {
						case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
							reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
							reflect.Float32, reflect.Float64, reflect.String:
							f.quoted = sf.Type.Kind() != reflect.Pointer
						}
					}
				}
				if sf.Type.Kind() == reflect.Pointer || lv.viaPointer {
					f.optional = true
				}
				all = append(all, f)
			}
		}
	}
	byName := map[string][]jsonField{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []jsonField
	for _, name := range order {
		cands := byName[name]
		minDepth := len(cands[0].index)
		for _, c := range cands {
			minDepth = min(minDepth, len(c.index))
		}
		var shallow, tagged []jsonField
		for _, c := range cands {
			if len(c.index) == minDepth {
				shallow = append(shallow, c)
				if c.tagged {
					tagged = append(tagged, c)
				}
			}
		}
		switch {
		case len(shallow) == 1:
			out = append(out, shallow[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	return out, nil
}

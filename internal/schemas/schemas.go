// Package schemas generates the JSON Schemas (draft 2020-12) of the protocol's documents
// from their Go types: every CloudEvent payload, every api request and reply body and the
// host configuration file. [Documents] lists them; `make schemas` writes them to the
// schemas folder, and the package's tests fail when the checked-in files drift from the
// types, when a golden wire example or an example file stops validating, when
// docs/asyncapi.yaml names other subjects or event types than the code, and when
// docs/protocol.md misses a subject, an event type or a code.
//
// The schemas are derived by [typeschema.OfType] (the builder that also derives tool
// argument schemas), with these additions:
//   - a named type listed in [Documents] is its own file, referenced by "$ref" elsewhere
//     (which also makes recursive types such as content blocks expressible);
//   - a named string type with constants in one of the source folders is an "enum" of their
//     values, read from the sources, so a new constant needs no second list;
//   - the doc comments of the types and of their fields become "description"s.
package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// Dialect is the JSON Schema draft of every generated document.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

// Module is the Go module path, used to map types to their source folders.
const Module = "github.com/awaken-dev/awaken"

// Dir is the folder of the checked-in schemas, relative to the module root.
const Dir = "schemas"

// sourceDirs are the packages whose constants give the enumerations and whose doc
// comments give the descriptions, relative to the module root.
var sourceDirs = []string{"pkg/contracts", "internal/bus", "pkg/httpapi", "internal/config"}

// Document is one generated schema file.
type Document struct {
	// File is the file name in the schemas folder, e.g. "batch_submission.json".
	File string
	// Type is the Go type the schema describes.
	Type reflect.Type
	// TagKey names the struct tag naming the fields ("json" when empty).
	TagKey string
	// Enums turns top-level string properties into enumerations of the constants of a named
	// string type, for fields the Go type declares as plain strings.
	Enums map[string]reflect.Type
	// NoRequired drops every "required" of the document (a configuration file whose loader
	// fills defaults).
	NoRequired bool
}

// ID is the $id of the document: its file name, a relative reference resolved against
// where the document was loaded from, so that the files reference each other by name
// ("tool_output.json") wherever the folder is served or copied.
func (d Document) ID() string { return d.File }

// Generate derives every document of [Documents], reading the enumerations and
// descriptions from the sources under root (the module root). The result maps file names
// to their bytes: indented JSON with a final newline.
func Generate(root string) (map[string][]byte, error) {
	src, err := readSources(root)
	if err != nil {
		return nil, err
	}
	byType := map[reflect.Type]Document{}
	for _, d := range Documents {
		if _, dup := byType[d.Type]; dup {
			return nil, fmt.Errorf("schemas: %s is listed twice", d.Type)
		}
		byType[d.Type] = d
	}
	out := make(map[string][]byte, len(Documents))
	for _, d := range Documents {
		if _, dup := out[d.File]; dup {
			return nil, fmt.Errorf("schemas: file %s is listed twice", d.File)
		}
		b, err := generate(d, byType, src)
		if err != nil {
			return nil, err
		}
		out[d.File] = b
	}
	return out, nil
}

func generate(d Document, byType map[reflect.Type]Document, src *sources) ([]byte, error) {
	rootSeen := false
	override := func(t reflect.Type) (map[string]any, bool) {
		if t == d.Type && !rootSeen {
			rootSeen = true // the root is derived; a recursive use of it is a $ref
			return nil, false
		}
		if other, ok := byType[t]; ok {
			return map[string]any{"$ref": other.File}, true
		}
		if values, ok := src.enums[typeKey(t)]; ok && t.Kind() == reflect.String {
			return map[string]any{"type": "string", "enum": values}, true
		}
		return nil, false
	}
	m, err := typeschema.OfType(d.Type, typeschema.Options{Override: override, TagKey: d.TagKey})
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", d.File, err)
	}
	props, _ := m["properties"].(map[string]any)
	for name, et := range d.Enums {
		p, ok := props[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schemas: %s: no property %q to enumerate", d.File, name)
		}
		values, ok := src.enums[typeKey(et)]
		if !ok {
			return nil, fmt.Errorf("schemas: %s: %s has no string constants", d.File, et)
		}
		p["enum"] = values
	}
	tagKey := d.TagKey
	if tagKey == "" {
		tagKey = "json"
	}
	src.annotate(m, d.Type, tagKey)
	if d.NoRequired {
		dropRequired(m)
	}
	m["$schema"] = Dialect
	m["$id"] = d.ID()
	m["title"] = d.Type.Name()
	if doc := src.docs[typeKey(d.Type)]; doc != "" {
		m["description"] = describe(doc)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", d.File, err)
	}
	return buf.Bytes(), nil
}

// outsideReference matches a comment's pointer at a section of a document outside the
// repository ("(Name §3.1)", "; Name §2.5"), which a schema's reader cannot follow.
var outsideReference = regexp.MustCompile(`\s*\([A-Za-z][A-Za-z ._-]* §[^)]*\)|;?\s*\b[A-Za-z]+ §[0-9.]+`)

// describe turns a doc comment into a one-line description.
func describe(doc string) string {
	doc = outsideReference.ReplaceAllString(doc, "")
	return strings.Join(strings.Fields(doc), " ")
}

// annotate gives every property of schema (derived from t) the doc comment of its Go
// field as its description, through inlined structs, slices and maps; a $ref stops it
// (the referenced document describes its own fields).
func (s *sources) annotate(schema map[string]any, t reflect.Type, tagKey string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if items, ok := schema["items"].(map[string]any); ok {
			s.annotate(items, t.Elem(), tagKey)
		}
	case reflect.Map:
		if values, ok := schema["additionalProperties"].(map[string]any); ok {
			s.annotate(values, t.Elem(), tagKey)
		}
	case reflect.Struct:
		props, ok := schema["properties"].(map[string]any)
		if !ok {
			return
		}
		s.annotateFields(props, t, tagKey)
	}
}

func (s *sources) annotateFields(props map[string]any, t reflect.Type, tagKey string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get(tagKey), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				s.annotateFields(props, ft, tagKey)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name := tag
		if name == "" {
			name = f.Name
		}
		p, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		if doc := s.fields[typeKey(t)+"."+f.Name]; doc != "" {
			if _, has := p["description"]; !has {
				p["description"] = describe(doc)
			}
		}
		s.annotate(p, f.Type, tagKey)
	}
}

// dropRequired removes every "required" keyword of a schema tree.
func dropRequired(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "required")
		for _, c := range x {
			dropRequired(c)
		}
	case []any:
		for _, c := range x {
			dropRequired(c)
		}
	}
}

func typeKey(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// sources holds what the generator reads from the Go sources: the values of every named
// string type's constants (so a new constant is a new enum value without another list)
// and the doc comment of every type.
type sources struct {
	enums map[string][]string
	docs  map[string]string
	// fields holds the doc comment of every struct field, by "{type key}.{Go field name}".
	fields map[string]string
}

func readSources(root string) (*sources, error) {
	s := &sources{enums: map[string][]string{}, docs: map[string]string{}, fields: map[string]string{}}
	for _, dir := range sourceDirs {
		if err := s.readPackage(root, dir); err != nil {
			return nil, err
		}
	}
	for k := range s.enums {
		sort.Strings(s.enums[k])
		s.enums[k] = slices.Compact(s.enums[k])
	}
	return s, nil
}

func (s *sources) readPackage(root, dir string) error {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		return fmt.Errorf("schemas: %w", err)
	}
	if len(paths) == 0 {
		return fmt.Errorf("schemas: no Go sources in %s", filepath.Join(root, dir))
	}
	pkg := Module + "/" + dir
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("schemas: %w", err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					doc := sp.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					if doc != nil {
						s.docs[pkg+"."+sp.Name.Name] = strings.TrimSpace(doc.Text())
					}
					if st, ok := sp.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							doc := field.Doc
							if doc == nil {
								doc = field.Comment
							}
							for _, name := range field.Names {
								if doc != nil {
									s.fields[pkg+"."+sp.Name.Name+"."+name.Name] = strings.TrimSpace(doc.Text())
								}
							}
						}
					}
				case *ast.ValueSpec:
					if gd.Tok != token.CONST {
						continue
					}
					key, ok := constType(pkg, f, sp.Type)
					if !ok {
						continue
					}
					for _, v := range sp.Values {
						lit, ok := v.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						value, err := strconv.Unquote(lit.Value)
						if err != nil {
							return fmt.Errorf("schemas: %s: %w", fset.Position(lit.Pos()), err)
						}
						s.enums[key] = append(s.enums[key], value)
					}
				}
			}
		}
	}
	return nil
}

// constType names the type of a typed constant declaration: a type of the package itself
// (RejectCode) or one imported from another package of the module (contracts.RejectCode,
// as internal/bus adds dead-letter codes to the rejection codes).
func constType(pkg string, f *ast.File, expr ast.Expr) (string, bool) {
	switch t := expr.(type) {
	case *ast.Ident:
		return pkg + "." + t.Name, true
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		if !ok {
			return "", false
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				continue
			}
			name := path[strings.LastIndexByte(path, '/')+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == x.Name {
				return path + "." + t.Sel.Name, true
			}
		}
	}
	return "", false
}

// ModuleRoot finds the module root from dir upwards (the folder holding go.mod).
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("schemas: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Write replaces the schema files in dir by docs: stale *.json files are removed, so a
// document dropped from [Documents] disappears.
func Write(dir string, docs map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("schemas: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return fmt.Errorf("schemas: %w", err)
	}
	for _, path := range old {
		if _, keep := docs[filepath.Base(path)]; !keep {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("schemas: %w", err)
			}
		}
	}
	for name, b := range docs {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("schemas: %w", err)
		}
	}
	return nil
}

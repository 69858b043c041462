package schemas

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go sources in %s: %v", dir, err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// stringConsts calls keep with the name and value of every string constant of files.
func stringConsts(files []*ast.File, keep func(name, value string)) {
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							keep(name.Name, v)
						}
					}
				}
			}
		}
	}
}

// constsNamed lists the string values of the constants of the package in dir whose names
// start with prefix (the api's refusal codes are untyped constants named Code…).
func constsNamed(t *testing.T, dir, prefix string) []string {
	t.Helper()
	var values []string
	stringConsts(parseDir(t, dir), func(name, value string) {
		if strings.HasPrefix(name, prefix) {
			values = append(values, value)
		}
	})
	return values
}

// TestProtocolDocumentNamesEverything fails when docs/protocol.md does not mention a
// subject, a CloudEvent type or a code the code defines: a new rejection code, ticket
// refusal, api refusal, subject or event type needs its line in the normative document.
func TestProtocolDocumentNamesEverything(t *testing.T) {
	root := moduleRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	src, err := readSources(root)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{
		"rejection code (contracts.RejectCode)":      src.enums[Module+"/pkg/contracts.RejectCode"],
		"ticket refusal (contracts.ResumeErrorCode)": src.enums[Module+"/pkg/contracts.ResumeErrorCode"],
		"api refusal (httpapi Code…)":                constsNamed(t, filepath.Join(root, "pkg", "httpapi"), "Code"),
		"subject (contracts.Names)":                  codeSubjects(t, root),
		"CloudEvent type":                            codeEventTypes(t, root),
	}
	for what, values := range groups {
		if len(values) == 0 {
			t.Errorf("found no %s in the code", what)
		}
		for _, v := range values {
			if !strings.Contains(doc, "`"+v+"`") {
				t.Errorf("docs/protocol.md does not name the %s `%s`", what, v)
			}
		}
	}
}

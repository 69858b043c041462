package archrules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// namesFile is the one file that may spell a service name: pkg/contracts/names.go.
const namesFile = "pkg/contracts/names.go"

// serviceNameLiterals lists every string literal in a non-test Go file of the tree at root
// (laid out like the module; testdata and nested modules skipped) that is exactly a
// service name, outside [namesFile]: a second declaration of a name that the
// subcommands, CloudEvent sources, fault hooks, NATS users and containers must agree on.
func serviceNameLiterals(t *testing.T, root string) []string {
	t.Helper()
	names := append(contracts.PipelineServices(), contracts.ServiceAPI)
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || rel == namesFile {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if v, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, v) {
				out = append(out, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+" spells the service name "+strconv.Quote(v)+" (use the pkg/contracts constant)")
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestServiceNamesAreDeclaredOnce(t *testing.T) {
	if v := serviceNameLiterals(t, filepath.Join("..", "..")); len(v) > 0 {
		t.Fatalf("service names declared again:\n  %s", strings.Join(v, "\n  "))
	}
}

// TestTheNameCheckFindsLiterals runs the check on a tree that spells a name twice (once in
// code, once in its own names.go, which is allowed) and once in a test file (allowed).
func TestTheNameCheckFindsLiterals(t *testing.T) {
	got := serviceNameLiterals(t, filepath.Join("testdata", "names"))
	want := []string{`services/x/x.go:4 spells the service name "gate" (use the pkg/contracts constant)`}
	if !slices.Equal(got, want) {
		t.Fatalf("found:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

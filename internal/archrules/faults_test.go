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
)

// faultFiles are the files that may call a fault hook: the commit-point wrappers of
// internal/pipeline, and the consume loop, whose own point sits between a handler's return
// and its acknowledgement.
var faultFiles = []string{"internal/pipeline/faults.go", "internal/bus/consume.go"}

// faultCalls lists every call in a non-test Go file of the tree at root (laid out like the
// module; testdata and nested modules skipped) of something named Fault or Faults — the
// hook itself (Env.Faults, ConsumerSpec.Fault) or a helper that forwards to it — outside
// [faultFiles]: fault injection is test machinery, and a handler reaches it only through
// the wrappers around its commit steps (pipeline.Operation), never inline.
func faultCalls(t *testing.T, root string) []string {
	t.Helper()
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
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || slices.Contains(faultFiles, rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if name == "Fault" || name == "Faults" {
				out = append(out, rel+":"+strconv.Itoa(fset.Position(call.Pos()).Line)+" calls "+name+
					" (fault points run in the wrappers of internal/pipeline/faults.go)")
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

func TestFaultsRunOnlyInTheirWrappers(t *testing.T) {
	if v := faultCalls(t, filepath.Join("..", "..")); len(v) > 0 {
		t.Fatalf("fault hooks called inline:\n  %s", strings.Join(v, "\n  "))
	}
}

// TestTheFaultCheckFindsInlineCalls runs the check on a tree with a handler that calls
// the hook inline, a wrapper file that may (allowed), and a test file that does (allowed).
func TestTheFaultCheckFindsInlineCalls(t *testing.T) {
	got := faultCalls(t, filepath.Join("testdata", "faults"))
	want := []string{
		"services/x/x.go:12 calls Fault (fault points run in the wrappers of internal/pipeline/faults.go)",
		"services/x/x.go:15 calls Faults (fault points run in the wrappers of internal/pipeline/faults.go)",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("found:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

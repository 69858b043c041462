package archrules

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordTypes are the stored records whose fields only their transitions in pkg/contracts
// may set.
var recordTypes = []string{"CallRecord", "BatchRecord"}

// handMutations type-checks the non-test Go files of each package in pkgs (import paths
// of this module, listed by go list with their export data) and reports every
// assignment to or increment of a field of a stored record outside
// pkg/contracts: such a write moves a record past its transitions.
func handMutations(t *testing.T, patterns ...string) []string {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .GoFiles \",\"}}\t{{.Module}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	type pkg struct{ path, dir, files string }
	var own []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 {
			continue
		}
		exports[f[0]] = f[1]
		if strings.HasPrefix(f[0], module+"/") && f[0] != module+"/pkg/contracts" {
			own = append(own, pkg{f[0], f[2], f[3]})
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if e := exports[path]; e != "" {
			return os.Open(e)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})
	var found []string
	for _, p := range own {
		if p.files == "" {
			continue
		}
		var files []*ast.File
		for _, name := range strings.Split(p.files, ",") {
			af, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, af)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.path, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.path, err)
		}
		report := func(e ast.Expr) {
			sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
			if !ok {
				return
			}
			s := info.Selections[sel]
			if s == nil || s.Kind() != types.FieldVal {
				return
			}
			recv := s.Recv()
			if ptr, ok := recv.(*types.Pointer); ok {
				recv = ptr.Elem()
			}
			named, ok := recv.(*types.Named)
			if !ok || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != module+"/pkg/contracts" ||
				!slices.Contains(recordTypes, named.Obj().Name()) {
				return
			}
			pos := fset.Position(sel.Pos())
			rel, _ := filepath.Rel(moduleRoot, pos.Filename)
			if abs, err := filepath.Abs(moduleRoot); err == nil {
				if r, err := filepath.Rel(abs, pos.Filename); err == nil {
					rel = r
				}
			}
			found = append(found, fmt.Sprintf("%s:%d sets %s.%s", filepath.ToSlash(rel), pos.Line, named.Obj().Name(), sel.Sel.Name))
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					for _, l := range n.Lhs {
						report(l)
					}
				case *ast.IncDecStmt:
					report(n.X)
				}
				return true
			})
		}
	}
	slices.Sort(found)
	return found
}

// TestNoServiceMovesARecordByHand: the services, executors and every internal package
// change a stored batch or call record only through its transitions (pkg/contracts), which
// check that the move is legal and stamp the timeline. Tests may still build any state
// they need.
func TestNoServiceMovesARecordByHand(t *testing.T) {
	noFindings(t, "records moved by hand", handMutations(t, "./services/...", "./internal/...", "./cmd/...", "./pkg/..."))
}

// TestTheMutationCheckFindsHandWrites runs the check on a fixture package that writes a
// call record's phase, timeline and entry by hand, so the module test cannot pass by
// checking nothing.
func TestTheMutationCheckFindsHandWrites(t *testing.T) {
	sameFindings(t, handMutations(t, "./internal/archrules/testdata/handwrite"), []string{
		"internal/archrules/testdata/handwrite/handwrite.go:10 sets CallRecord.Phase",
		"internal/archrules/testdata/handwrite/handwrite.go:11 sets CallRecord.Timeline",
		"internal/archrules/testdata/handwrite/handwrite.go:12 sets CallRecord.EnteredBy",
		"internal/archrules/testdata/handwrite/handwrite.go:13 sets BatchRecord.Phase",
		"internal/archrules/testdata/handwrite/handwrite.go:14 sets CallRecord.Entered",
		"internal/archrules/testdata/handwrite/handwrite.go:14 sets CallRecord.EnteredBy",
	})
}

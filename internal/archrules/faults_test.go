package archrules

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// faultFiles are the files that may call a fault hook: the commit-point wrappers of
// internal/pipeline, and the consume loop, whose own point sits between a handler's return
// and its acknowledgement.
var faultFiles = []string{"internal/pipeline/faults.go", "internal/bus/consume.go"}

// faultCalls lists every call in a non-test Go file of the tree at root (laid out like the
// module, walked by [findInGoFiles]) of something named Fault or Faults — the hook itself
// (Env.Faults, ConsumerSpec.Fault) or a helper that forwards to it — outside [faultFiles]:
// fault injection is test machinery, and a handler reaches it only through the wrappers
// around its commit steps (pipeline.Operation), never inline.
func faultCalls(t *testing.T, root string) []string {
	t.Helper()
	return findInGoFiles(t, root, func(rel string, f *ast.File, report func(token.Pos, string)) {
		if slices.Contains(faultFiles, rel) {
			return
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
				report(call.Pos(), "calls "+name+" (fault points run in the wrappers of internal/pipeline/faults.go)")
			}
			return true
		})
	})
}

func TestFaultsRunOnlyInTheirWrappers(t *testing.T) {
	noFindings(t, "fault hooks called inline", faultCalls(t, moduleRoot))
}

// TestTheFaultCheckFindsInlineCalls runs the check on a tree with a handler that calls
// the hook inline, a wrapper file that may (allowed), and a test file that does (allowed).
func TestTheFaultCheckFindsInlineCalls(t *testing.T) {
	sameFindings(t, faultCalls(t, filepath.Join("testdata", "faults")), []string{
		"services/x/x.go:12 calls Fault (fault points run in the wrappers of internal/pipeline/faults.go)",
		"services/x/x.go:15 calls Faults (fault points run in the wrappers of internal/pipeline/faults.go)",
	})
}

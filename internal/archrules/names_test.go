package archrules

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// namesFile is the one file that may spell a service name: pkg/contracts/names.go.
const namesFile = "pkg/contracts/names.go"

// serviceNameLiterals lists every string literal in a non-test Go file of the tree at root
// (laid out like the module, walked by [findInGoFiles]) that is exactly a service name,
// outside [namesFile]: a second declaration of a name that the subcommands, CloudEvent
// sources, fault hooks, NATS users and containers must agree on.
func serviceNameLiterals(t *testing.T, root string) []string {
	t.Helper()
	names := append(contracts.PipelineServices(), contracts.ServiceAPI)
	return findInGoFiles(t, root, func(rel string, f *ast.File, report func(token.Pos, string)) {
		if rel == namesFile {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if v, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, v) {
				report(lit.Pos(), "spells the service name "+strconv.Quote(v)+" (use the pkg/contracts constant)")
			}
			return true
		})
	})
}

func TestServiceNamesAreDeclaredOnce(t *testing.T) {
	noFindings(t, "service names declared again", serviceNameLiterals(t, moduleRoot))
}

// TestTheNameCheckFindsLiterals runs the check on a tree that spells a name twice (once in
// code, once in its own names.go, which is allowed) and once in a test file (allowed).
func TestTheNameCheckFindsLiterals(t *testing.T) {
	sameFindings(t, serviceNameLiterals(t, filepath.Join("testdata", "names")),
		[]string{`services/x/x.go:4 spells the service name "gate" (use the pkg/contracts constant)`})
}

package archrules

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// envHolders are the services that hand the whole environment on: the executors, each a
// few lines around internal/execcore, the executor core that pkg/executor runs on as well
// and that takes the environment as the machinery it is.
var envHolders = []string{"services/brain-exec/", "services/sandbox-exec/"}

// envUses lists every mention of pipeline.Env in a non-test Go file under services/ of
// the tree at root (walked by [findInGoFiles]) outside a function named DepsOf: a service
// is given a dependency value of its own (its Deps: the runtime, the basics, the stores
// and the capabilities it uses), built from the environment by its DepsOf, so what a
// service depends on reads off its Deps and its code cannot reach the rest.
func envUses(t *testing.T, root string) []string {
	t.Helper()
	return findInGoFiles(t, root, func(rel string, f *ast.File, report func(token.Pos, string)) {
		if !strings.HasPrefix(rel, "services/") || slices.ContainsFunc(envHolders, func(p string) bool { return strings.HasPrefix(rel, p) }) {
			return
		}
		pipeline, ok := importName(f, module+"/internal/pipeline")
		if !ok {
			return
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "DepsOf" && fn.Recv == nil {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && isQualified(sel, pipeline, "Env") {
					report(sel.Pos(), "names pipeline.Env (a service works with its Deps, built by its DepsOf)")
				}
				return true
			})
		}
	})
}

func TestEveryServiceWorksWithItsDeps(t *testing.T) {
	noFindings(t, "services naming the environment outside DepsOf", envUses(t, moduleRoot))
}

// TestTheDepsCheckFindsTheEnvironment runs the check on a tree whose service holds the
// environment in a field, takes it as a parameter and names it in a method called DepsOf
// (not the function), beside its DepsOf (allowed), a test file (allowed) and an executor
// (allowed).
func TestTheDepsCheckFindsTheEnvironment(t *testing.T) {
	const why = " names pipeline.Env (a service works with its Deps, built by its DepsOf)"
	sameFindings(t, envUses(t, filepath.Join("testdata", "deps")), []string{
		"services/x/x.go:7" + why,
		"services/x/x.go:10" + why,
		"services/x/x.go:13" + why,
	})
}

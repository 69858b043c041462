package archrules

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// rawConnNames are the selectors that reach the raw connection: the fields of
// pipeline.Env that hold it (Conn, JS) and the accessors that hand it out (a publisher's
// JetStream(), a JetStream's Conn()).
var rawConnNames = map[string]bool{"Conn": true, "JS": true, "JetStream": true}

// rawConnUses lists every selector in a non-test Go file under services/ of the tree at
// root (walked by [findInGoFiles]) named after the raw connection ([rawConnNames]): a
// service does what it does with the connection through a capability of pipeline.Env
// named for it (internal/pipeline/capabilities.go: publishing a notice, binding a stream,
// starting consumers…), so its real dependencies read off its calls. Tests may use the
// connection to look at what a service did.
func rawConnUses(t *testing.T, root string) []string {
	t.Helper()
	return findInGoFiles(t, root, func(rel string, f *ast.File, report func(token.Pos, string)) {
		if !strings.HasPrefix(rel, "services/") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && rawConnNames[sel.Sel.Name] {
				report(sel.Sel.Pos(), "reaches the raw connection ("+sel.Sel.Name+"; use a capability of pipeline.Env)")
			}
			return true
		})
	})
}

func TestNoServiceReachesTheRawConnection(t *testing.T) {
	noFindings(t, "services reaching the raw connection", rawConnUses(t, moduleRoot))
}

// TestTheRawConnectionCheckFindsUses runs the check on a tree with a service that reaches
// the connection three ways, a test file that does (allowed) and internal/pipeline, which
// holds it (allowed).
func TestTheRawConnectionCheckFindsUses(t *testing.T) {
	sameFindings(t, rawConnUses(t, filepath.Join("testdata", "rawconn")), []string{
		"services/x/x.go:14 reaches the raw connection (JS; use a capability of pipeline.Env)",
		"services/x/x.go:18 reaches the raw connection (Conn; use a capability of pipeline.Env)",
		"services/x/x.go:22 reaches the raw connection (Conn; use a capability of pipeline.Env)",
		"services/x/x.go:22 reaches the raw connection (JetStream; use a capability of pipeline.Env)",
	})
}

package archrules

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A layer of the module. Imports run down the layers, never up: a package may import its
// own layer and the ones below it.
type layer int

const (
	// vocabulary is what a platform or tool author imports: pkg/ but the assemblies and
	// pkg/executor, and internal/toolctx, the private half of the tool vocabulary
	// (pkg/executor/tool calls the hooks it carries; it imports nothing of the module).
	vocabulary layer = iota
	// machinery is internal/ but the wiring — the bus, the stores, the executor core,
	// the sandbox, the read model, the test harnesses of single services — with deploy
	// (the embedded deployment assets) and pkg/executor: the public door to the Brain
	// executor's machinery, which runs that machinery and so sits on it, not under it.
	machinery
	// services are services/<name>: each a deployable of its own.
	services
	// wiring is internal/wiring: the composition root that knows every service and starts
	// them (the services' commands, the embedded stack, `awaken dev`, the command line,
	// the stacks the tests start).
	wiring
	// top is what is built on the wiring: the public assemblies (pkg/devserver,
	// pkg/awakentest), the binaries (cmd/) and the module's own consumers (e2e, chaos,
	// examples, the adapters' test kit).
	top
)

func (l layer) String() string {
	return [...]string{"pkg vocabulary", "internal machinery", "services", "wiring", "assemblies and commands"}[l]
}

// under reports whether the module-relative path rel is dir or below it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// layerOf returns the layer of the package at the module-relative path rel.
func layerOf(rel string) layer {
	switch {
	case under(rel, "pkg/devserver"), under(rel, "pkg/awakentest"):
		return top
	case under(rel, "internal/wiring"):
		return wiring
	case under(rel, "services"):
		return services
	case rel == "pkg/executor":
		return machinery
	case rel == "internal/toolctx", under(rel, "pkg"):
		return vocabulary
	case under(rel, "internal"), under(rel, "deploy"):
		return machinery
	default:
		return top
	}
}

// layerViolations lists every import of a non-test file of the tree at root (laid out
// like the module) that runs from a lower layer to a higher one. A test may start what it
// tests on a higher layer (a service's tests run the stack through the wiring), so test
// files are not read. A service importing the wiring is named as such: the wiring knows
// every service, so a service built on it would know the others.
func layerViolations(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	modulePackages(t, root, func(rel string, pkg *build.Package) {
		from := layerOf(rel)
		for _, imp := range pkg.Imports {
			sub, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			to := layerOf(sub)
			switch {
			case to <= from:
			case from == services && to == wiring:
				out = append(out, rel+" imports "+imp+" (a service never imports the wiring, which knows every service)")
			default:
				out = append(out, rel+" imports "+imp+" (up from the "+from.String()+" to the "+to.String()+": imports run down the layers)")
			}
		}
	})
	slices.Sort(out)
	return out
}

// executorDeps lists what pkg/executor of the tree at root links that a team writing one
// Go tool must not: a service, the wiring, or wazero (the sandbox's engine). It follows
// the non-test imports of the module's packages from pkg/executor; a package outside the
// module is not followed, so wazero is found where a package of the module imports it.
// Each finding names the chain of imports that pulls it in.
func executorDeps(t *testing.T, root string) []string {
	t.Helper()
	const start, wazero = "pkg/executor", "github.com/tetratelabs/wazero"
	via := map[string]string{start: ""} // module-relative package or import path → who imports it
	chain := func(p string) string {
		var links []string
		for ; p != ""; p = via[p] {
			links = append(links, p)
		}
		slices.Reverse(links)
		return strings.Join(links, " → ")
	}
	var out []string
	queue := []string{start}
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		pkg, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(rel)), build.ImportComment)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				continue
			}
			t.Fatalf("%s: %v", rel, err)
		}
		for _, imp := range pkg.Imports {
			sub, inModule := strings.CutPrefix(imp, module+"/")
			next := imp
			switch {
			case inModule:
				next = sub
			case under(imp, wazero):
				next = wazero // one finding for the engine, not one per package of it
			}
			if _, seen := via[next]; seen {
				continue
			}
			via[next] = rel
			if next == wazero || inModule && (under(sub, "services") || under(sub, "internal/wiring")) {
				out = append(out, "pkg/executor depends on "+next+" ("+chain(next)+"): a tool author links no service, no wiring and no wazero")
			}
			if inModule {
				queue = append(queue, sub)
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestImportsRunDownTheLayers(t *testing.T) {
	noFindings(t, "imports run up the layers", layerViolations(t, moduleRoot))
}

func TestTheExecutorLinksNoServiceNoWiringNoWazero(t *testing.T) {
	noFindings(t, "pkg/executor links what a tool author must not", executorDeps(t, moduleRoot))
}

// TestTheLayerCheckFindsUpwardImports runs both checks on a tree with an upward import
// from every layer but the top one, a service on the wiring, imports the layers allow
// (down, and test files up), and a pkg/executor that links a service, the wiring and,
// two packages away, wazero.
func TestTheLayerCheckFindsUpwardImports(t *testing.T) {
	tree := filepath.Join("testdata", "layers")
	up := func(from, to layer) string {
		return " (up from the " + from.String() + " to the " + to.String() + ": imports run down the layers)"
	}
	sameFindings(t, layerViolations(t, tree), []string{
		"internal/harness imports " + module + "/internal/wiring/app" + up(machinery, wiring),
		"internal/wiring/app imports " + module + "/pkg/awakentest" + up(wiring, top),
		"pkg/client imports " + module + "/internal/bus" + up(vocabulary, machinery),
		"pkg/executor imports " + module + "/internal/wiring/cli" + up(machinery, wiring),
		"pkg/executor imports " + module + "/services/beta" + up(machinery, services),
		"services/alpha imports " + module + "/internal/wiring/cli (a service never imports the wiring, which knows every service)",
		"services/gamma imports " + module + "/pkg/devserver" + up(services, top),
	})
	sameFindings(t, executorDeps(t, tree), []string{
		"pkg/executor depends on github.com/tetratelabs/wazero (pkg/executor → internal/runner → internal/engine → github.com/tetratelabs/wazero): a tool author links no service, no wiring and no wazero",
		"pkg/executor depends on internal/wiring/cli (pkg/executor → internal/wiring/cli): a tool author links no service, no wiring and no wazero",
		"pkg/executor depends on services/beta (pkg/executor → services/beta): a tool author links no service, no wiring and no wazero",
	})
}

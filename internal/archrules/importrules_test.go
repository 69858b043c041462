package archrules

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/awaken-dev/awaken"

// violations lists every import of the tree at root (laid out like the module) that
// breaks a structural rule:
//   - a non-test file of pkg/contracts imports something other than the standard library
//     and the packages under pkg/contracts (pkg/contracts/toolpattern, …), and a non-test
//     file of a package under pkg/contracts imports anything outside the standard library:
//     the vocabulary is split by subject, but whoever imports it still pulls in nothing
//     but the standard library, so every subpackage is a standard-library-only leaf and
//     pkg/contracts may lean on it;
//   - a non-test file of a pkg/ package imports internal/bus: the public packages serve other
//     modules, and the broker plumbing they would drag along is ours to change;
//   - a non-test file of a pkg/ package imports a package under services/: a public package
//     built on a service's code exposes that service's shape (pkg/executor once reached
//     into services/brain-exec for the tool types); what both need lives in a pkg/ leaf
//     or an internal/ package;
//   - a non-test file of pkg/executor/tool imports anything of the module but pkg/contracts
//     and internal/toolctx: it is the tool vocabulary's leaf, imported by the Brain executor
//     (internal/brainexec) and by pkg/executor (which runs it), so an import that leads back
//     to either is a cycle
//     and any other drags the runtime into every tool author's build;
//   - a file (test files included) of services/<a> imports services/<b>, b ≠ a;
//   - a file (test files included) of a package under a service (services/gate/limits)
//     imports a package it lies under (services/gate): the service's root wires its
//     subpackages, which answer it through their own small interfaces, so the arrows run
//     one way and a subpackage can be read and tested without the service around it;
//   - a non-test file outside services/ imports a package under services/, unless it is
//     the wiring that runs them (cmd/ and internal/wiring): a library built on a service's
//     code couples to its internals (internal/schemas once imported services/api for the
//     HTTP bodies, which live in pkg/httpapi);
//   - a file (test files included) of internal/schemas imports a package under services/:
//     the schemas are derived from the public types, and a test reaching into a service
//     would let a body drift back there.
//
// Other modules nested in the tree (bench/, adapters/, examples/) are not walked
// ([moduleDirs]).
func violations(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	modulePackages(t, root, func(rel string, pkg *build.Package) {
		if rel == "pkg/contracts" {
			for _, imp := range pkg.Imports {
				if !isStandard(imp) && !strings.HasPrefix(imp, module+"/pkg/contracts/") {
					out = append(out, rel+" imports "+imp+" (only the standard library and the leaves under pkg/contracts are allowed)")
				}
			}
		}
		if strings.HasPrefix(rel, "pkg/contracts/") {
			for _, imp := range pkg.Imports {
				if !isStandard(imp) {
					out = append(out, rel+" imports "+imp+" (a package under pkg/contracts is a leaf: the standard library only)")
				}
			}
		}
		if strings.HasPrefix(rel, "pkg/") {
			for _, imp := range pkg.Imports {
				if imp == module+"/internal/bus" || strings.HasPrefix(imp, module+"/internal/bus/") {
					out = append(out, rel+" imports "+imp+" (public packages keep off the bus internals)")
				}
				if strings.HasPrefix(imp, module+"/services/") {
					out = append(out, rel+" imports "+imp+" (public packages are not built on service code)")
				}
			}
		}
		if rel == "pkg/executor/tool" {
			for _, imp := range pkg.Imports {
				if strings.HasPrefix(imp, module+"/") && imp != module+"/pkg/contracts" && imp != module+"/internal/toolctx" {
					out = append(out, rel+" imports "+imp+" (the tool vocabulary is a leaf: pkg/contracts and internal/toolctx only)")
				}
			}
		}
		if _, isService := serviceOf(rel); !isService && !wiresServices(rel) && !strings.HasPrefix(rel, "pkg/") { // pkg/ has its own rule above
			for _, imp := range pkg.Imports {
				if strings.HasPrefix(imp, module+"/services/") {
					out = append(out, rel+" imports "+imp+" (only cmd/ and internal/wiring run service code)")
				}
			}
		}
		if rel == "internal/schemas" || strings.HasPrefix(rel, "internal/schemas/") {
			for _, imp := range slices.Concat(pkg.Imports, pkg.TestImports, pkg.XTestImports) {
				if strings.HasPrefix(imp, module+"/services/") {
					out = append(out, rel+" imports "+imp+" (the schemas derive from public types, tests included)")
				}
			}
		}
		if own, ok := serviceOf(rel); ok {
			all := slices.Concat(pkg.Imports, pkg.TestImports, pkg.XTestImports)
			for _, imp := range all {
				sub, found := strings.CutPrefix(imp, module+"/")
				if !found {
					continue
				}
				if other, ok := serviceOf(sub); ok && other != own {
					out = append(out, rel+" imports "+imp+" (services never import each other)")
				}
				if sub != rel && strings.HasPrefix(rel, sub+"/") {
					out = append(out, rel+" imports "+imp+" (a package of a service never imports one it lies under)")
				}
			}
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// serviceOf returns the service a module-relative path belongs to ("services/gate/x" →
// "gate").
func serviceOf(rel string) (string, bool) {
	rest, ok := strings.CutPrefix(rel, "services/")
	if !ok || rest == "" {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, true
}

// wiresServices reports whether the module-relative path rel is a package that runs the
// services and so may import them: the binaries and the wiring under internal/wiring (the
// services' assembly, the embedded stack, `awaken dev`, the command line, the tests'
// stacks).
func wiresServices(rel string) bool {
	for _, dir := range []string{"cmd", "internal/wiring"} {
		if rel == dir || strings.HasPrefix(rel, dir+"/") {
			return true
		}
	}
	return false
}

// isStandard reports whether an import path names a standard-library package: its first
// element has no dot (every module path outside the standard library has a domain).
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestTheModuleKeepsItsImportRules(t *testing.T) {
	if _, err := os.Stat(filepath.Join(moduleRoot, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	noFindings(t, "import rules broken", violations(t, moduleRoot))
}

// TestTheCheckFindsBrokenRules runs the check on a small tree that breaks every rule, so
// the module test above cannot pass by checking nothing.
func TestTheCheckFindsBrokenRules(t *testing.T) {
	sameFindings(t, violations(t, filepath.Join("testdata", "broken")), []string{
		"internal/render imports " + module + "/services/beta (only cmd/ and internal/wiring run service code)",
		"internal/schemas imports " + module + "/services/alpha (the schemas derive from public types, tests included)",
		"pkg/client imports " + module + "/internal/bus (public packages keep off the bus internals)",
		"pkg/contracts imports " + module + "/internal/jsonschema (only the standard library and the leaves under pkg/contracts are allowed)",
		"pkg/contracts imports github.com/nats-io/nats.go (only the standard library and the leaves under pkg/contracts are allowed)",
		"pkg/contracts/heavy imports " + module + "/pkg/contracts (a package under pkg/contracts is a leaf: the standard library only)",
		"pkg/contracts/heavy imports github.com/santhosh-tekuri/jsonschema/v6 (a package under pkg/contracts is a leaf: the standard library only)",
		"pkg/executor imports " + module + "/services/alpha (public packages are not built on service code)",
		"pkg/executor/tool imports " + module + "/internal/config (the tool vocabulary is a leaf: pkg/contracts and internal/toolctx only)",
		"services/alpha imports " + module + "/services/beta (services never import each other)",
		"services/beta/sub imports " + module + "/services/alpha (services never import each other)",
		"services/beta/sub imports " + module + "/services/beta (a package of a service never imports one it lies under)",
	})
}

package archrules

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// moduleDirs calls visit with every directory of the module laid out at root — its
// module-relative path ("." for root, slash-separated) and its path on disk — skipping
// hidden directories, testdata and the other modules nested in the tree (bench/,
// adapters/, examples/: they build against the public packages, and their own go.mod
// decides what they may use). An error from visit fails t.
func moduleDirs(t *testing.T, root string, visit func(rel, dir string) error) {
	t.Helper()
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if dir != root {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		return visit(filepath.ToSlash(rel), dir)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// modulePackages calls visit with every Go package of the directories [moduleDirs] walks
// (its module-relative path and its non-test imports, as go/build reads them); a
// directory without Go files is skipped, an unreadable one fails t.
func modulePackages(t *testing.T, root string, visit func(rel string, pkg *build.Package)) {
	t.Helper()
	moduleDirs(t, root, func(rel, dir string) error {
		pkg, err := build.ImportDir(dir, build.ImportComment)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		visit(rel, pkg)
		return nil
	})
}

// findInGoFiles runs check on every non-test Go file in the directories [moduleDirs]
// walks, with the file's module-relative path ("services/gate/service.go") and syntax
// tree, and returns what it reported, sorted, each finding led by its file and line
// ("services/gate/service.go:12 …"). A file that does not parse fails t.
func findInGoFiles(t *testing.T, root string, check func(rel string, f *ast.File, report func(pos token.Pos, what string))) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	moduleDirs(t, root, func(rel, dir string) error {
		names, err := sourceFiles(dir)
		if err != nil {
			return err
		}
		for _, name := range names {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			file := path.Join(rel, name)
			check(file, f, func(pos token.Pos, what string) {
				found = append(found, file+":"+strconv.Itoa(fset.Position(pos).Line)+" "+what)
			})
		}
		return nil
	})
	slices.Sort(found)
	return found
}

// sourceFiles names the non-test Go files in dir: what makes dir a package of the module,
// and what the syntax rules read.
func sourceFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			names = append(names, name)
		}
	}
	return names, nil
}

// moduleRoot is the root of the module, from this package's directory.
var moduleRoot = filepath.Join("..", "..")

// noFindings fails t when a rule checked on the module found anything; what names the
// kind of violation.
func noFindings(t *testing.T, what string, found []string) {
	t.Helper()
	if len(found) > 0 {
		t.Fatalf("%s:\n  %s", what, strings.Join(found, "\n  "))
	}
}

// sameFindings fails t unless a rule checked on a tree that breaks it found exactly want,
// in any order (found is sorted): the run on the module cannot pass by checking nothing.
func sameFindings(t *testing.T, found, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(found, want) {
		t.Fatalf("found:\n  %s\nwant:\n  %s", strings.Join(found, "\n  "), strings.Join(want, "\n  "))
	}
}

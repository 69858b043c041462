package archrules

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The package map is the fenced block under "## Package map" in docs/architecture.md: a
// line a package (or tree), its path first and ending in "/", its purpose after it, and
// continuation lines indented. A new maintainer reads it to find where a subject lives, so
// it must name every package the module has and none it no longer has.
const (
	architectureDoc = "docs/architecture.md"
	packageMapTitle = "## Package map"
)

// packageMapEntries reads the paths the package map of the document at doc names, in the
// order it names them ("internal/bus", "services/<name>", "examples").
func packageMapEntries(t *testing.T, doc string) []string {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []string
	inSection, inBlock := false, false
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = line == packageMapTitle
		case inSection && strings.HasPrefix(line, "```"):
			inBlock = !inBlock
		case inBlock && line != "" && line[0] != ' ':
			first, _, _ := strings.Cut(line, " ")
			if strings.HasSuffix(first, "/") {
				entries = append(entries, strings.TrimSuffix(first, "/"))
			}
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatalf("%s has no package map (a fenced block under %q)", doc, packageMapTitle)
	}
	return entries
}

// packageDirs lists the module-relative directories of the tree at root (walked by
// [moduleDirs]) that hold a non-test Go file: the module's packages.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	moduleDirs(t, root, func(rel, dir string) error {
		names, err := sourceFiles(dir)
		if len(names) > 0 {
			dirs = append(dirs, rel)
		}
		return err
	})
	return dirs
}

// packageMapFindings compares a package map's entries with the packages: a package the
// map does not name, and an entry that names nothing. A package is named by its own entry,
// by "services/<name>" when it is a service's top directory, or by a one-segment entry
// ("examples", "deploy", "e2e") that stands for its whole tree; a deeper entry names its
// directory only, so a new package under internal/sandbox still needs a line of its own.
func packageMapFindings(entries, packages []string, exists func(dir string) bool) []string {
	named := func(pkg string) bool {
		for _, e := range entries {
			switch {
			case e == pkg:
				return true
			case e == "services/<name>" && strings.HasPrefix(pkg, "services/") && !strings.Contains(strings.TrimPrefix(pkg, "services/"), "/"):
				return true
			case !strings.Contains(e, "/") && strings.HasPrefix(pkg, e+"/"):
				return true
			}
		}
		return false
	}
	var found []string
	for _, pkg := range packages {
		if pkg != "." && !named(pkg) {
			found = append(found, pkg+": a package the map does not name")
		}
	}
	for _, e := range entries {
		if e != "services/<name>" && !exists(e) {
			found = append(found, e+": an entry for a directory that does not exist")
		}
	}
	slices.Sort(found)
	return found
}

// TestThePackageMapNamesEveryPackage keeps docs/architecture.md's package map true: every
// package of the module has a line, and every line a directory.
func TestThePackageMapNamesEveryPackage(t *testing.T) {
	entries := packageMapEntries(t, filepath.Join(moduleRoot, architectureDoc))
	exists := func(dir string) bool {
		info, err := os.Stat(filepath.Join(moduleRoot, filepath.FromSlash(dir)))
		return err == nil && info.IsDir()
	}
	noFindings(t, "the package map of "+architectureDoc+" is out of date",
		packageMapFindings(entries, packageDirs(t, moduleRoot), exists))
}

// TestTheMapCheckFindsGaps runs the comparison on a map that misses a package, misses a
// deeper one under a named directory, and names a directory that is gone.
func TestTheMapCheckFindsGaps(t *testing.T) {
	entries := []string{"cmd/awaken", "services/<name>", "internal/sandbox", "internal/gone", "examples"}
	packages := []string{".", "cmd/awaken", "services/gate", "services/brain-exec/builtin",
		"internal/sandbox", "internal/sandbox/sandboxtest", "internal/bus", "examples/sandbox-tools/wc"}
	exists := func(dir string) bool { return dir != "internal/gone" }
	sameFindings(t, packageMapFindings(entries, packages, exists), []string{
		"internal/bus: a package the map does not name",
		"internal/gone: an entry for a directory that does not exist",
		"internal/sandbox/sandboxtest: a package the map does not name",
		"services/brain-exec/builtin: a package the map does not name",
	})
}

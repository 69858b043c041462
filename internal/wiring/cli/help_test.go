package cli

import (
	"context"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// listedCommands is every command path `awaken help` lists ("calls cancel", "dev", …), in
// the order listed: the command part of each "  awaken …" line is its words before the
// first argument (an upper-case placeholder, a bracket or a flag), up to the two spaces
// that start its description.
func listedCommands(t *testing.T) []string {
	t.Helper()
	code, out, errOut := runCLI(context.Background(), "help")
	if code != 0 {
		t.Fatalf("awaken help: exit %d: %s", code, errOut)
	}
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  awaken ") {
			continue
		}
		cmd, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		var path []string
		for _, w := range strings.Fields(cmd)[1:] {
			if !word.MatchString(w) {
				break
			}
			path = append(path, w)
		}
		if p := strings.Join(path, " "); p != "" && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	if len(paths) < 20 {
		t.Fatalf("awaken help lists %d commands, expected the whole tree: %q", len(paths), paths)
	}
	return paths
}

// withGroups adds to paths every group their words go through ("calls" for "calls cancel").
func withGroups(paths []string) []string {
	all := slices.Clone(paths)
	for _, p := range paths {
		words := strings.Fields(p)
		for i := 1; i < len(words); i++ {
			if g := strings.Join(words[:i], " "); !slices.Contains(all, g) {
				all = append(all, g)
			}
		}
	}
	return all
}

// countingListener is a TCP listener that counts the connections made to it: a command that
// printed its help must never have dialled NATS.
func countingListener(t *testing.T) (url string, dials *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dials = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	return "nats://" + ln.Addr().String(), dials
}

// TestEveryCommandAnswersHelp walks every command and group `awaken help` lists and asks
// each for help the ways a person does — -h, --help, help, also after an id — expecting
// its usage on stdout, exit 0, and no connection to NATS.
func TestEveryCommandAnswersHelp(t *testing.T) {
	url, dials := countingListener(t)
	t.Setenv("NATS_URL", url)
	t.Setenv("AWAKEN_CONFIG", t.TempDir()+"/absent.yaml")
	for _, path := range withGroups(listedCommands(t)) {
		words := strings.Fields(path)
		for _, tail := range [][]string{{"-h"}, {"--help"}, {"help"}, {"-help"}, {"some-id", "-h"}, {"--json", "-h", "--", "x"}} {
			args := append(slices.Clone(words), tail...)
			code, out, errOut := runCLI(context.Background(), args...)
			if code != 0 || !strings.Contains(out, "usage") || !strings.Contains(out, "awaken "+path) {
				t.Errorf("awaken %s: exit %d, stdout %q, stderr %q; want the usage of %q on stdout and exit 0",
					strings.Join(args, " "), code, firstLine(out), firstLine(errOut), path)
			}
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("asking for help connected to NATS %d times", n)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestHelpListsEveryCommand holds `awaken help` and the command table to the same tree: a
// command added to the table but not to the help (or the other way) fails here, so the walk
// of [TestEveryCommandAnswersHelp] covers every command there is.
func TestHelpListsEveryCommand(t *testing.T) {
	var leaves func(prefix string, cs []*command) []string
	leaves = func(prefix string, cs []*command) []string {
		var out []string
		for _, c := range cs {
			if c.declare != nil {
				out = append(out, prefix+c.name)
			}
			out = append(out, leaves(prefix+c.name+" ", c.subs)...)
		}
		return out
	}
	table, listed := leaves("", commands()), listedCommands(t)
	slices.Sort(table)
	slices.Sort(listed)
	if !slices.Equal(table, listed) {
		t.Errorf("the command table has %q\nawaken help lists %q", table, listed)
	}
}

// TestHelpWordsBeforeDoubleDash checks what asks for help: -h, --help and the word help
// before "--", never a flag's value or a word after "--".
func TestHelpWordsBeforeDoubleDash(t *testing.T) {
	fs := newFlags("t")
	fs.String("reason", "", "")
	fs.Bool("json", false, "")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"-h"}, true},
		{[]string{"id", "--help"}, true},
		{[]string{"--json", "help"}, true},
		{[]string{"--reason", "help"}, false},
		{[]string{"--reason=x", "help"}, true},
		{[]string{"--", "-h"}, false},
		{[]string{"id", "--", "help"}, false},
		{[]string{"id"}, false},
	} {
		if got := wantsHelp(fs, tc.args); got != tc.want {
			t.Errorf("wantsHelp(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestToolsHelpNamesEveryFormat: the help of tools ls and `awaken help` name every catalog
// format of the one list.
func TestToolsHelpNamesEveryFormat(t *testing.T) {
	_, top, _ := runCLI(context.Background(), "help")
	_, ls, _ := runCLI(context.Background(), "tools", "ls", "-h")
	for _, f := range contracts.CatalogFormats() {
		for name, text := range map[string]string{"awaken help": top, "awaken tools ls -h": ls} {
			if !strings.Contains(text, f) {
				t.Errorf("%s does not name the catalog format %q", name, f)
			}
		}
	}
}

// TestAuditHelpSaysWhereAChainStarts: the help of audit verify and export shows examples
// and says that a cut chain is verified from, and exported with, its signed checkpoint.
func TestAuditHelpSaysWhereAChainStarts(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"verify": {"examples:", "--file", "verified from checkpoint", "--without-checkpoint"},
		"export": {"examples:", "--since 48h", "checkpoint"},
	} {
		code, out, errOut := runCLI(context.Background(), "audit", cmd, "-h")
		if code != 0 {
			t.Fatalf("audit %s -h: exit %d: %s", cmd, code, errOut)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("awaken audit %s -h does not say %q:\n%s", cmd, want, out)
			}
		}
	}
}

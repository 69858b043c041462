package toolpattern

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// oracleGlob is a direct, exponential-time statement of the glob semantics documented on
// Pattern, used to check the polynomial matcher on small inputs.
func oracleGlob(p string, text []rune, afterSlash bool) bool {
	if p == "" {
		return len(text) == 0
	}
	for _, cls := range []struct {
		src  string
		pred func(rune) bool
	}{
		{"[ab]", func(r rune) bool { return r == 'a' || r == 'b' }},
		{"[!a]", func(r rune) bool { return r != 'a' }},
		{"[a-b]", func(r rune) bool { return r >= 'a' && r <= 'b' }},
		{"[/]", func(r rune) bool { return r == '/' }},
	} {
		if strings.HasPrefix(p, cls.src) {
			return len(text) > 0 && cls.pred(text[0]) && oracleGlob(p[len(cls.src):], text[1:], false)
		}
	}
	switch p[0] {
	case '*':
		j := 0
		for j < len(p) && p[j] == '*' {
			j++
		}
		if j >= 2 && afterSlash && j < len(p) && p[j] == '/' {
			// `**/` as a whole segment: nothing, or anything that ends in '/'.
			rest := p[j+1:]
			if oracleGlob(rest, text, true) {
				return true
			}
			for i, r := range text {
				if r == '/' && oracleGlob(rest, text[i+1:], true) {
					return true
				}
			}
			return false
		}
		for i := 0; i <= len(text); i++ {
			if oracleGlob(p[j:], text[i:], false) {
				return true
			}
		}
		return false
	case '?':
		return len(text) > 0 && oracleGlob(p[1:], text[1:], false)
	case '\\':
		return len(p) > 1 && len(text) > 0 && text[0] == rune(p[1]) && oracleGlob(p[2:], text[1:], p[1] == '/')
	}
	return len(text) > 0 && text[0] == rune(p[0]) && oracleGlob(p[1:], text[1:], p[0] == '/')
}

func TestPropGlobAgreesWithBacktrackingOracle(t *testing.T) {
	// Each token with the strings it can stand for, so that texts built from a glob match it
	// often, exercising every path of the matcher, not only early rejection.
	type token struct {
		src   string
		texts []string
	}
	tokens := []token{
		{"a", []string{"a"}}, {"b", []string{"b"}}, {"/", []string{"/"}},
		{"*", []string{"", "a", "/", "ab/", "b/a"}}, {"**", []string{"", "a/b", "/"}},
		{"**/", []string{"", "/", "a/", "a/b/"}}, {"/**/", []string{"/", "/a/", "//"}},
		{"?", []string{"a", "/", "*"}}, {"[ab]", []string{"a", "b"}}, {"[!a]", []string{"b", "/"}},
		{"[a-b]", []string{"a", "b"}}, {"[/]", []string{"/"}}, {`\*`, []string{"*"}}, {`\/`, []string{"/"}},
	}
	alphabet := []rune("ab/*")
	rapid.Check(t, func(t *rapid.T) {
		picked := rapid.SliceOfN(rapid.SampledFrom(tokens), 0, 7).Draw(t, "glob")
		var glob, built strings.Builder
		for _, tok := range picked {
			glob.WriteString(tok.src)
			built.WriteString(rapid.SampledFrom(tok.texts).Draw(t, "piece"))
		}
		text := []rune(built.String())
		switch rapid.IntRange(0, 3).Draw(t, "edit") {
		case 1: // replace one character
			if len(text) > 0 {
				text[rapid.IntRange(0, len(text)-1).Draw(t, "at")] = rapid.SampledFrom(alphabet).Draw(t, "r")
			}
		case 2: // delete one character
			if len(text) > 0 {
				i := rapid.IntRange(0, len(text)-1).Draw(t, "at")
				text = append(text[:i], text[i+1:]...)
			}
		case 3: // insert one character
			i := rapid.IntRange(0, len(text)).Draw(t, "at")
			text = append(text[:i], append([]rune{rapid.SampledFrom(alphabet).Draw(t, "r")}, text[i:]...)...)
		}
		g, off, msg := compileGlob(glob.String())
		if msg != "" {
			t.Fatalf("compileGlob(%q): at %d: %s", glob.String(), off, msg)
		}
		if got, want := g.match(text), oracleGlob(glob.String(), text, true); got != want {
			t.Fatalf("glob %q on %q: matcher %v, oracle %v", glob.String(), string(text), got, want)
		}
	})
}

// Patterns assembled from random parts (names, globs, paths, values with quotes and
// backslashes) parse, and their canonical form parses back to the same pattern.
func TestPropPatternStringRoundTrips(t *testing.T) {
	idents := []string{"a", "b2", "file_path", "my-key", "0"}
	values := []string{"", "x", "a b", `say "hi"`, `back\slash`, `tail\`, "é*", "src/**/*.go", "[ab]?", `\*`}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString(rapid.SampledFrom([]string{"Bash", "mcp__*", "T?", "t_[ab]", "x.y"}).Draw(t, "tool"))
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 1:
			b.WriteString("(" + rapid.SampledFrom([]string{"*", "npm *", "*.txt", "(a) b", "echo \"x\"", " padded  "}).Draw(t, "primary") + ")")
		case 2:
			n := rapid.IntRange(1, 3).Draw(t, "conds")
			b.WriteString("(")
			for i := range n {
				if i > 0 {
					b.WriteString(rapid.SampledFrom([]string{",", ", ", " ,  "}).Draw(t, "comma"))
				}
				segs := rapid.IntRange(1, 4).Draw(t, "segs")
				for s := range segs {
					switch rapid.IntRange(0, 3).Draw(t, "seg") {
					case 0:
						if s > 0 {
							b.WriteString(".")
						}
						b.WriteString(rapid.SampledFrom(idents).Draw(t, "ident"))
					case 1:
						if s > 0 {
							b.WriteString(".")
						}
						b.WriteString("*")
					case 2:
						if s == 0 {
							b.WriteString(rapid.SampledFrom(idents).Draw(t, "ident"))
						}
						fmt.Fprintf(&b, "[%d]", rapid.IntRange(0, 99).Draw(t, "index"))
					case 3:
						if s == 0 {
							b.WriteString(rapid.SampledFrom(idents).Draw(t, "ident"))
						}
						b.WriteString("[*]")
					}
				}
				op := rapid.SampledFrom([]string{"~", "=", "!~", "!="}).Draw(t, "op")
				v := rapid.SampledFrom(values).Draw(t, "value")
				if (op == "~" || op == "!~") && strings.HasSuffix(v, `\`) {
					v += "x" // a glob may not end in a lone escape
				}
				quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v)
				b.WriteString(" " + op + ` "` + quoted + `"`)
			}
			b.WriteString(")")
		}
		src := b.String()
		p, err := Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		q, err := Parse(p.String())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", p.String(), src, err)
		}
		if !reflect.DeepEqual(p, q) || q.String() != p.String() {
			t.Fatalf("%q -> %q -> %q: patterns differ", src, p.String(), q.String())
		}
	})
}

package doclinks

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repo is the repository root, from this package's directory.
const repo = "../.."

// documents are the files whose links are checked, relative to repo.
func documents(t *testing.T) []string {
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repo, "README.md")}, docs...)
}

var (
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// link is one relative link of a document.
type link struct {
	doc    string
	line   int
	target string
}

// scan returns a document's relative links and its anchors (GitHub's ids of its
// headings, and explicit <a name|id> anchors). Fenced code blocks are skipped, and so are
// code spans: a link there is an example, not a link.
func scan(t *testing.T, path string) (links []link, anchors map[string]bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors = map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			id := Anchor(m[2])
			if k := seen[id]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", id, k)] = true
			} else {
				anchors[id] = true
			}
			seen[id]++
		}
		text := codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(text); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if u, err := url.Parse(target); err == nil && (u.Scheme != "" || u.Host != "") {
				continue // http(s), mailto: checked by nobody here
			}
			links = append(links, link{doc: path, line: n, target: target})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return links, anchors
}

// Anchor is GitHub's id of a heading: the rendered text (links become their text, code
// spans their content) lowercased, every character but letters, digits, spaces, hyphens
// and underscores dropped, spaces turned into hyphens. A repeated id gets -1, -2, … (see
// scan).
func Anchor(text string) string {
	text = linkText.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAnchor: the ids GitHub gives headings of this repository's kind.
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"A first session": "a-first-session",
		"HTTP api, web console, micro service: batches and approvals": "http-api-web-console-micro-service-batches-and-approvals",
		"`awaken dev` and `make run`":                                 "awaken-dev-and-make-run",
		"Tools — brain and sandbox":                                   "tools--brain-and-sandbox",
		"[Links](docs/x.md) in a heading":                             "links-in-a-heading",
		"snake_case and 3.2 s":                                        "snake_case-and-32-s",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestRelativeLinks: every relative link of README.md and docs/*.md points at a file or
// directory that exists and, with a #fragment into a Markdown file, at one of its
// headings.
func TestRelativeLinks(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		_, a := scan(t, path)
		anchorsOf[path] = a
		return a
	}
	checked := 0
	for _, doc := range documents(t) {
		links, own := scan(t, doc)
		anchorsOf[doc] = own
		for _, l := range links {
			checked++
			where := fmt.Sprintf("%s:%d: link %q", strings.TrimPrefix(l.doc, repo+"/"), l.line, l.target)
			pathPart, fragment, _ := strings.Cut(l.target, "#")
			pathPart, err := url.PathUnescape(pathPart)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			target := l.doc
			if pathPart != "" {
				target = filepath.Join(filepath.Dir(l.doc), filepath.FromSlash(pathPart))
				if strings.HasPrefix(pathPart, "/") {
					target = filepath.Join(repo, filepath.FromSlash(pathPart))
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: no such file or directory", where)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !anchors(target)[fragment] {
				t.Errorf("%s: no heading with anchor #%s in %s", where, fragment, strings.TrimPrefix(target, repo+"/"))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: is the scan broken?")
	}
	t.Logf("%d relative links checked", checked)
}

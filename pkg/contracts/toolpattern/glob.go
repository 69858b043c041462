package toolpattern

import (
	"fmt"
	"unicode/utf8"
)

// The glob matcher.
//
// A glob compiles to a head segment and a list of gaps, each followed by a segment. A
// segment is a fixed-length run of single-character tokens; a gap is a run of stars. A
// plain gap matches any string; a "dir" gap (a `**` that forms a whole path segment before
// a `/`) matches "" or any string that ends in `/`. The segment before a dir gap always ends
// in a literal `/` (or the gap starts the glob).
//
// Matching anchors the head at the start and the last segment at the end, then places each
// middle segment at its leftmost admissible position. Greedy placement is exact here: the
// remainder after an earlier placement is a superset-admitting suffix for every gap kind
// (a plain gap absorbs any prefix; a dir gap absorbs any prefix that ends in `/`, and the
// segment before it ends in `/`). Each placement scans positions once and compares at
// most len(segment) tokens at each, so a match costs O(len(text) × len(glob)).

type globTokKind uint8

const (
	globLit globTokKind = iota + 1
	globAny
	globClass
)

type runeRange struct{ lo, hi rune }

type globTok struct {
	kind    globTokKind
	r       rune
	negated bool
	ranges  []runeRange
}

func (t *globTok) matches(r rune) bool {
	switch t.kind {
	case globLit:
		return r == t.r
	case globAny:
		return true
	case globClass:
		in := false
		for _, rg := range t.ranges {
			if rg.lo <= r && r <= rg.hi {
				in = true
				break
			}
		}
		return in != t.negated
	}
	return false
}

type globGap struct {
	dir bool
	seg []globTok
}

type glob struct {
	head []globTok
	gaps []globGap
}

// compileGlob compiles pattern. On error it returns the byte offset of the problem in
// pattern and a message; msg is empty on success.
func compileGlob(pattern string) (g *glob, off int, msg string) {
	g = &glob{}
	cur := &g.head
	afterSlash := true // the start of a glob counts as a segment boundary
	i := 0
	for i < len(pattern) {
		c := pattern[i]
		switch c {
		case '*':
			j := i
			for j < len(pattern) && pattern[j] == '*' {
				j++
			}
			dir := j-i >= 2 && afterSlash && j < len(pattern) && pattern[j] == '/'
			if dir {
				j++
			}
			if n := len(g.gaps); n > 0 && len(g.gaps[n-1].seg) == 0 && cur == &g.gaps[n-1].seg {
				// Adjacent gaps merge: dir·dir = dir; dir·star = star.
				g.gaps[n-1].dir = g.gaps[n-1].dir && dir
			} else {
				g.gaps = append(g.gaps, globGap{dir: dir})
			}
			cur = &g.gaps[len(g.gaps)-1].seg
			afterSlash = dir
			i = j
		case '?':
			*cur = append(*cur, globTok{kind: globAny})
			afterSlash = false
			i++
		case '[':
			tok, next, eoff, emsg := compileClass(pattern, i)
			if emsg != "" {
				return nil, eoff, emsg
			}
			*cur = append(*cur, tok)
			afterSlash = false
			i = next
		case '\\':
			if i+1 >= len(pattern) {
				return nil, i, `trailing "\" escapes nothing (write "\\\\" in a quoted value for a literal backslash)`
			}
			r, n := utf8.DecodeRuneInString(pattern[i+1:])
			*cur = append(*cur, globTok{kind: globLit, r: r})
			afterSlash = r == '/'
			i += 1 + n
		default:
			r, n := utf8.DecodeRuneInString(pattern[i:])
			*cur = append(*cur, globTok{kind: globLit, r: r})
			afterSlash = r == '/'
			i += n
		}
	}
	return g, 0, ""
}

// compileClass compiles the class starting at pattern[i] == '['. `]` first in the set is a
// literal; `!` or `^` first negates; `a-z` is a range; `\x` escapes x.
func compileClass(pattern string, i int) (tok globTok, next, off int, msg string) {
	tok.kind = globClass
	j := i + 1
	if j < len(pattern) && (pattern[j] == '!' || pattern[j] == '^') {
		tok.negated = true
		j++
	}
	readRune := func() (rune, bool) {
		if j < len(pattern) && pattern[j] == '\\' {
			j++
		}
		if j >= len(pattern) {
			return 0, false
		}
		r, n := utf8.DecodeRuneInString(pattern[j:])
		j += n
		return r, true
	}
	first := true
	for {
		if j >= len(pattern) {
			return tok, 0, i, `unterminated character class "["`
		}
		if pattern[j] == ']' && !first {
			return tok, j + 1, 0, ""
		}
		first = false
		lo, ok := readRune()
		if !ok {
			return tok, 0, i, `unterminated character class "["`
		}
		hi := lo
		if j+1 < len(pattern) && pattern[j] == '-' && pattern[j+1] != ']' {
			rangeAt := j
			j++
			if hi, ok = readRune(); !ok {
				return tok, 0, i, `unterminated character class "["`
			}
			if hi < lo {
				return tok, 0, rangeAt, fmt.Sprintf("character range %q-%q is reversed", lo, hi)
			}
		}
		tok.ranges = append(tok.ranges, runeRange{lo, hi})
	}
}

func (g *glob) matchString(s string) bool {
	if g == nil {
		return false
	}
	return g.match([]rune(s))
}

func segmentAt(seg []globTok, text []rune, p int) bool {
	if p < 0 || p+len(seg) > len(text) {
		return false
	}
	for k := range seg {
		if !seg[k].matches(text[p+k]) {
			return false
		}
	}
	return true
}

func (g *glob) match(text []rune) bool {
	if len(g.gaps) == 0 {
		return len(text) == len(g.head) && segmentAt(g.head, text, 0)
	}
	if !segmentAt(g.head, text, 0) {
		return false
	}
	cur := len(g.head)
	last := g.gaps[len(g.gaps)-1]
	limit := len(text) - len(last.seg)
	if limit < cur || !segmentAt(last.seg, text, limit) {
		return false
	}
	admissible := func(dir bool, gapStart, p int) bool {
		return !dir || p == gapStart || text[p-1] == '/'
	}
	for _, gap := range g.gaps[:len(g.gaps)-1] {
		found := -1
		for p := cur; p+len(gap.seg) <= limit; p++ {
			if admissible(gap.dir, cur, p) && segmentAt(gap.seg, text, p) {
				found = p
				break
			}
		}
		if found < 0 {
			return false
		}
		cur = found + len(gap.seg)
	}
	return admissible(last.dir, cur, limit)
}

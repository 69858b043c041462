package toolpattern

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The parser of the pattern grammar (see [Parse]).

type patternParser struct {
	src string
	pos int
	end int // end of the pattern with trailing white space removed
}

func (ps *patternParser) fail(pos int, format string, args ...any) *Error {
	return &Error{Pattern: ps.src, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (ps *patternParser) peek() byte {
	if ps.pos < ps.end {
		return ps.src[ps.pos]
	}
	return 0
}

// describe names what is at the cursor, for error messages.
func (ps *patternParser) describe() string {
	if ps.pos >= ps.end {
		return "end of pattern"
	}
	r, _ := utf8.DecodeRuneInString(ps.src[ps.pos:ps.end])
	return strconv.QuoteRune(r)
}

func (ps *patternParser) skipSpace() {
	for ps.pos < ps.end {
		r, n := utf8.DecodeRuneInString(ps.src[ps.pos:ps.end])
		if !unicode.IsSpace(r) {
			return
		}
		ps.pos += n
	}
}

func (ps *patternParser) parseTool(p *Pattern) *Error {
	start := ps.pos
	if ps.peek() == '/' {
		return ps.fail(start, `regular-expression tool names ("/…/") are not allowed in permission patterns; use a glob such as mcp__github__*`)
	}
	for ps.pos < ps.end {
		r, n := utf8.DecodeRuneInString(ps.src[ps.pos:ps.end])
		if r == '(' || unicode.IsSpace(r) {
			break
		}
		if r == ')' || r == '"' {
			return ps.fail(ps.pos, "unexpected %q in tool name", r)
		}
		ps.pos += n
	}
	name := ps.src[start:ps.pos]
	if name == "" {
		return ps.fail(start, "expected a tool name")
	}
	p.tool = name
	p.toolKind = toolExact
	if strings.ContainsAny(name, "*?[") {
		g, off, msg := compileGlob(name)
		if msg != "" {
			return ps.fail(start+off, "tool name glob: %s", msg)
		}
		p.toolKind, p.toolGlob = toolGlob, g
	}
	return nil
}

func (ps *patternParser) parseArgs(p *Pattern) *Error {
	ps.skipSpace()
	if ps.peek() == '*' {
		save := ps.pos
		ps.pos++
		ps.skipSpace()
		if ps.peek() == ')' {
			p.args = argsAny
			return nil
		}
		ps.pos = save
	}
	if looksLikeFieldConditions(ps.src[ps.pos:ps.end]) {
		return ps.parseConditions(p)
	}
	return ps.parsePrimary(p)
}

// looksLikeFieldConditions decides between `tool(field op "value")` and a primary glob:
// a field path (identifier characters, `.`, `[...]`, `*` segments, with white space
// allowed next to `.` and `[`) followed by an operator. Anything else is a primary glob.
func looksLikeFieldConditions(s string) bool {
	i := 0
	skip := func(i int) int {
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		return i
	}
	joins := func(j int) bool { return j < len(s) && (s[j] == '.' || s[j] == '[') }
scan:
	for i < len(s) {
		c := s[i]
		switch {
		case isIdentByte(c) || c == '.':
			i++
		case c == '[':
			if j := strings.IndexByte(s[i:], ']'); j >= 0 {
				i += j + 1
			} else {
				i = len(s)
			}
		case c == '*':
			if j := skip(i + 1); joins(j) {
				i = j
				continue
			}
			i++
			break scan
		default:
			j := skip(i)
			if j > i && (i > 0 && s[i-1] == '.' || joins(j)) {
				i = j
				continue
			}
			break scan
		}
	}
	rest := s[skip(i):]
	return strings.HasPrefix(rest, "~") || strings.HasPrefix(rest, "=") ||
		strings.HasPrefix(rest, "!~") || strings.HasPrefix(rest, "!=")
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (ps *patternParser) parseConditions(p *Pattern) *Error {
	p.args = argsFields
	for {
		ps.skipSpace()
		if len(p.conds) == MaxConditions {
			return ps.fail(ps.pos, "more than %d field conditions", MaxConditions)
		}
		c, err := ps.parseCondition()
		if err != nil {
			return err
		}
		p.conds = append(p.conds, c)
		ps.skipSpace()
		if ps.peek() != ',' {
			return nil
		}
		ps.pos++
	}
}

func (ps *patternParser) parseCondition() (fieldCondition, *Error) {
	var c fieldCondition
	path, err := ps.parsePath()
	if err != nil {
		return c, err
	}
	ps.skipSpace()
	op, err := ps.parseOp()
	if err != nil {
		return c, err
	}
	ps.skipSpace()
	valuePos := ps.pos
	value, err := ps.parseQuoted()
	if err != nil {
		return c, err
	}
	c.path, c.op, c.value = path, op, value
	if op == opGlob || op == opNotGlob {
		g, _, msg := compileGlob(value)
		if msg != "" {
			return c, ps.fail(valuePos, "value glob: %s", msg)
		}
		c.glob = g
	}
	return c, nil
}

func (ps *patternParser) parsePath() ([]pathSeg, *Error) {
	var segs []pathSeg
	push := func(at int, s pathSeg) *Error {
		if len(segs) == MaxPathDepth {
			return ps.fail(at, "field path deeper than %d segments", MaxPathDepth)
		}
		segs = append(segs, s)
		return nil
	}
	for {
		ps.skipSpace()
		if ps.peek() == '*' {
			if err := push(ps.pos, pathSeg{kind: segWildcard}); err != nil {
				return nil, err
			}
			ps.pos++
		} else {
			start := ps.pos
			for ps.pos < ps.end && isIdentByte(ps.src[ps.pos]) {
				ps.pos++
			}
			if ps.pos == start {
				return nil, ps.fail(start, "expected a field name, found %s", ps.describe())
			}
			if err := push(start, pathSeg{kind: segField, name: ps.src[start:ps.pos]}); err != nil {
				return nil, err
			}
		}
		ps.skipSpace()
		for ps.peek() == '[' {
			open := ps.pos
			ps.pos++
			ps.skipSpace()
			var seg pathSeg
			if ps.peek() == '*' {
				ps.pos++
				seg.kind = segAnyIndex
			} else {
				start := ps.pos
				for ps.pos < ps.end && ps.src[ps.pos] >= '0' && ps.src[ps.pos] <= '9' {
					ps.pos++
				}
				n, err := strconv.Atoi(ps.src[start:ps.pos])
				if err != nil || n > maxIndex {
					return nil, ps.fail(start, "expected an array index or * in [ ], found %s", ps.describe())
				}
				seg.kind, seg.index = segIndex, n
			}
			if err := push(open, seg); err != nil {
				return nil, err
			}
			ps.skipSpace()
			if ps.peek() != ']' {
				return nil, ps.fail(ps.pos, "expected ']', found %s", ps.describe())
			}
			ps.pos++
			ps.skipSpace()
		}
		if ps.peek() != '.' {
			return segs, nil
		}
		ps.pos++
	}
}

func (ps *patternParser) parseOp() (matchOp, *Error) {
	rest := ps.src[ps.pos:ps.end]
	for _, re := range [...]string{"!=~", "=~"} {
		if strings.HasPrefix(rest, re) {
			return 0, ps.fail(ps.pos, "regular-expression operator %q is not allowed in permission patterns; use ~ or !~ with a glob", re)
		}
	}
	for _, o := range [...]struct {
		tok string
		op  matchOp
	}{{"!=", opNotExact}, {"!~", opNotGlob}, {"~", opGlob}, {"=", opExact}} {
		if strings.HasPrefix(rest, o.tok) {
			ps.pos += len(o.tok)
			return o.op, nil
		}
	}
	return 0, ps.fail(ps.pos, "expected an operator (~, =, !~ or !=), found %s", ps.describe())
}

func (ps *patternParser) parseQuoted() (string, *Error) {
	if ps.peek() != '"' {
		return "", ps.fail(ps.pos, `expected '"' to start the value, found %s (values are quoted: field ~ "glob")`, ps.describe())
	}
	open := ps.pos
	ps.pos++
	var b strings.Builder
	for {
		if ps.pos >= ps.end {
			return "", ps.fail(open, "unterminated quoted value")
		}
		r, n := utf8.DecodeRuneInString(ps.src[ps.pos:ps.end])
		ps.pos += n
		switch r {
		case '"':
			return b.String(), nil
		case '\\':
			if ps.pos >= ps.end {
				return "", ps.fail(ps.pos-1, "unterminated escape in quoted value")
			}
			e, m := utf8.DecodeRuneInString(ps.src[ps.pos:ps.end])
			ps.pos += m
			if e != '"' && e != '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(e)
		default:
			b.WriteRune(r)
		}
	}
}

func (ps *patternParser) parsePrimary(p *Pattern) *Error {
	start := ps.pos
	depth := 0
scan:
	for ps.pos < ps.end {
		switch ps.src[ps.pos] {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				break scan
			}
			depth--
		}
		ps.pos++
	}
	raw := ps.src[start:ps.pos]
	value := strings.TrimRightFunc(raw, unicode.IsSpace)
	if value == "" {
		return ps.fail(start, "empty argument pattern (write tool or tool(*) for any arguments)")
	}
	g, off, msg := compileGlob(value)
	if msg != "" {
		return ps.fail(start+off, "argument glob: %s", msg)
	}
	p.args, p.primary, p.primGlob = argsPrimary, value, g
	return nil
}

// Package toolpattern is the permission-pattern language of the host policy and the host
// limits: a tool name or glob with optional argument conditions (`Bash(npm *)`,
// `mcp__github__*(repo ~ "acme/*")`), parsed once and matched against calls.
//
// It is a leaf of pkg/contracts and, like it, uses only the standard library: the policy
// (contracts.CompilePolicy) and the limits (compiled with the policy, contracts.Policy.Limits) compile their rules'
// patterns with it, and a platform can parse or test a pattern without the rest of the
// vocabulary.
package toolpattern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the permission-pattern grammar. Patterns come from operators and, through
// per-run policies, from submitters; arguments come from models. The limits keep parsing
// and matching cheap and bounded whatever either side writes.
const (
	// MaxLength bounds a pattern in bytes. It also bounds every glob in it, which
	// keeps glob matching at O(len(value) × MaxLength) in the worst case.
	MaxLength = 1024
	// MaxConditions bounds the field conditions of one pattern.
	MaxConditions = 32
	// MaxPathDepth bounds the segments of one field path (`a.b[0].c` has four).
	MaxPathDepth = 32
	// maxIndex bounds an array index in a field path.
	maxIndex = 1<<31 - 1
)

// Error reports a permission pattern that does not parse. Pos is the byte offset in
// Pattern where the problem was found. Patterns that use regular expressions (`=~`, `!=~`,
// `/regex/` tool names) are rejected with a Error that names the operator: a port of
// a regex rule that silently matched nothing would turn a deny into a fail-open.
type Error struct {
	Pattern string
	Pos     int
	Msg     string
}

// Error names the pattern, the position and the problem.
func (e *Error) Error() string {
	return fmt.Sprintf("permission pattern %q: at byte %d: %s", e.Pattern, e.Pos, e.Msg)
}

// Specificity orders the rules that match one call: the more specific rule decides.
// Fields are compared lexicographically in declaration order (see [Specificity.Compare]).
//
//   - ToolKind: 3 for an exact tool name, 2 for a glob tool name.
//   - HasArgs: 1 if the pattern constrains the arguments, else 0 (`tool` and `tool(*)`).
//   - Conditions: the number of argument conditions; a primary glob (`Bash(npm *)`) counts
//     as one condition, as in the original awaken-tool-pattern crate.
//   - OpPrecision: the sum over conditions of 3 for `=`/`!=` and 2 for `~`/`!~`; a primary
//     glob contributes 2.
type Specificity struct {
	ToolKind    int
	HasArgs     int
	Conditions  int
	OpPrecision int
}

// Compare returns -1, 0 or +1 as s is less specific than, as specific as, or more specific
// than o, comparing ToolKind, HasArgs, Conditions and OpPrecision in that order.
func (s Specificity) Compare(o Specificity) int {
	for _, d := range [...]int{
		s.ToolKind - o.ToolKind,
		s.HasArgs - o.HasArgs,
		s.Conditions - o.Conditions,
		s.OpPrecision - o.OpPrecision,
	} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

type toolMatchKind uint8

const (
	toolExact toolMatchKind = iota + 1
	toolGlob
)

type argMatchKind uint8

const (
	argsAny argMatchKind = iota
	argsPrimary
	argsFields
)

type matchOp uint8

const (
	opGlob matchOp = iota + 1
	opExact
	opNotGlob
	opNotExact
)

func (o matchOp) String() string {
	switch o {
	case opGlob:
		return "~"
	case opExact:
		return "="
	case opNotGlob:
		return "!~"
	case opNotExact:
		return "!="
	}
	return "?"
}

func (o matchOp) precision() int {
	if o == opExact || o == opNotExact {
		return 3
	}
	return 2
}

type pathSegKind uint8

const (
	segField    pathSegKind = iota + 1 // named object key: `name`
	segIndex                           // array element: `[3]`
	segAnyIndex                        // every array element: `[*]`
	segWildcard                        // every object value: `*`
)

type pathSeg struct {
	kind  pathSegKind
	name  string
	index int
}

type fieldCondition struct {
	path  []pathSeg
	op    matchOp
	value string
	glob  *glob // compiled value for ~ and !~, nil for = and !=
}

// Pattern is one parsed permission pattern (Claude-Code compatible grammar):
//
//	Bash                          exact tool name, any arguments
//	Bash(*)                       the same, spelled out
//	mcp__github__*                glob tool name: * ? [ab] [a-z] [!a] \x
//	Bash(npm *)                   primary glob (see below)
//	Edit(file_path ~ "src/**")    field condition; ops ~ (glob) = (exact) !~ !=
//	Tool(a.b[0].c = "x", d ~ "y") nested paths and several conditions (all must hold)
//	Tool(items[*].name = "x")     any array element; `*` as a path segment: any object key
//
// Matching:
//   - A primary glob is matched against the single value of a one-key argument object,
//     otherwise against the whole arguments rendered as canonical JSON (sorted keys, no
//     insignificant space).
//   - A field path resolves to every value it reaches; a condition holds if it holds for at
//     least one of them. A path that reaches nothing makes the condition false for every
//     operator, including `!~` and `!=`: a negated deny does not catch a call that omits the
//     field.
//   - Values compare as strings: a string as itself, null as "", numbers as their JSON text,
//     booleans as true/false, objects and arrays as canonical JSON. Arguments that are JSON
//     null or empty count as {}.
//   - Globs: `*` matches any run of characters including `/`; a `**` that forms a whole path
//     segment before a `/` (`src/**/x`) also matches no segment at all, so `src/**/*.go`
//     matches `src/a.go`; `?` matches one character; `[...]` one character of a set;
//     `\` escapes the next character. Matching is case-sensitive and takes
//     O(len(text) × len(glob)) time at worst: there is no backtracking blow-up.
//   - Inside a quoted value, `\"` is a quote and `\\` a backslash; any other `\x` is kept
//     as written (so in a glob it escapes x).
//   - A tool name runs to `(` or white space; it may not start with `/` or contain `)` or
//     `"`. Arguments that start like a field path followed by an operator are field
//     conditions and need a quoted value: `Bash(ls ~/x)` is rejected; write
//     `Bash(command ~ "ls ~/x")`.
//
// Regular expressions (`=~`, `!=~`, `/regex/` tool names) are rejected at parse time.
//
// The zero Pattern matches nothing. A Pattern is immutable and safe for concurrent
// use.
type Pattern struct {
	toolKind toolMatchKind
	tool     string
	toolGlob *glob
	args     argMatchKind
	primary  string
	primGlob *glob
	conds    []fieldCondition
}

// Parse parses s (surrounding white space is ignored). Every error is a
// [*Error].
func Parse(s string) (Pattern, error) {
	if len(s) > MaxLength {
		return Pattern{}, &Error{Pattern: s, Pos: MaxLength,
			Msg: fmt.Sprintf("pattern is longer than %d bytes", MaxLength)}
	}
	if !utf8.ValidString(s) {
		pos := 0
		for pos < len(s) {
			r, n := utf8.DecodeRuneInString(s[pos:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			pos += n
		}
		return Pattern{}, &Error{Pattern: s, Pos: pos, Msg: "pattern is not valid UTF-8"}
	}
	end := len(strings.TrimRightFunc(s, unicode.IsSpace))
	start := end - len(strings.TrimLeftFunc(s[:end], unicode.IsSpace))
	ps := &patternParser{src: s, pos: start, end: end}
	if start == end {
		return Pattern{}, ps.fail(0, "empty pattern")
	}
	var p Pattern
	if err := ps.parseTool(&p); err != nil {
		return Pattern{}, err
	}
	ps.skipSpace()
	if ps.peek() == '(' {
		ps.pos++
		if err := ps.parseArgs(&p); err != nil {
			return Pattern{}, err
		}
		ps.skipSpace()
		if ps.peek() != ')' {
			return Pattern{}, ps.fail(ps.pos, "expected ')' to close the arguments, found %s", ps.describe())
		}
		ps.pos++
	}
	ps.skipSpace()
	if ps.pos < ps.end {
		return Pattern{}, ps.fail(ps.pos, "unexpected %q after the pattern", ps.src[ps.pos:ps.end])
	}
	return p, nil
}

// String renders p in the canonical form of the grammar; Parse(p.String())
// yields an equivalent pattern. `tool(*)` renders as `tool`.
func (p Pattern) String() string {
	var b strings.Builder
	b.WriteString(p.tool)
	switch p.args {
	case argsPrimary:
		b.WriteByte('(')
		b.WriteString(p.primary)
		b.WriteByte(')')
	case argsFields:
		b.WriteByte('(')
		for i, c := range p.conds {
			if i > 0 {
				b.WriteString(", ")
			}
			for j, s := range c.path {
				switch s.kind {
				case segField:
					if j > 0 {
						b.WriteByte('.')
					}
					b.WriteString(s.name)
				case segWildcard:
					if j > 0 {
						b.WriteByte('.')
					}
					b.WriteByte('*')
				case segIndex:
					b.WriteByte('[')
					b.WriteString(strconv.Itoa(s.index))
					b.WriteByte(']')
				case segAnyIndex:
					b.WriteString("[*]")
				}
			}
			b.WriteByte(' ')
			b.WriteString(c.op.String())
			b.WriteString(` "`)
			for _, r := range c.value {
				if r == '"' || r == '\\' {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
			b.WriteByte('"')
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Specificity returns the precedence of p among matching rules; it depends on the pattern
// only, not on the call.
func (p Pattern) Specificity() Specificity {
	s := Specificity{ToolKind: 3}
	if p.toolKind == toolGlob {
		s.ToolKind = 2
	}
	switch p.args {
	case argsPrimary:
		s.HasArgs, s.Conditions, s.OpPrecision = 1, 1, opGlob.precision()
	case argsFields:
		s.HasArgs, s.Conditions = 1, len(p.conds)
		for _, c := range p.conds {
			s.OpPrecision += c.op.precision()
		}
	}
	return s
}

// Matches reports whether p matches a call of toolID with the JSON arguments args. Null or
// empty args count as {}. Arguments that are not valid JSON match only patterns that do not
// look at arguments; the policy (contracts.Policy.Evaluate) denies such calls outright instead.
func (p Pattern) Matches(toolID string, args json.RawMessage) bool {
	if !p.MatchesTool(toolID) {
		return false
	}
	if p.args == argsAny {
		return true
	}
	a, err := DecodeArgs(args)
	if err != nil {
		return false
	}
	return p.MatchesArgs(a)
}

// MatchesTool reports whether p's tool part matches toolID, whatever the arguments. With
// [Pattern.MatchesArgs] it lets a caller decode a call's arguments once, with [DecodeArgs],
// for every pattern it tries (and only when some pattern's tool part matches).
func (p Pattern) MatchesTool(toolID string) bool {
	switch p.toolKind {
	case toolExact:
		return p.tool == toolID
	case toolGlob:
		return p.toolGlob.matchString(toolID)
	}
	return false
}

// LooksAtArgs reports whether p has an argument part (`tool` and `tool(*)` do not): only
// then does a caller need the call's arguments decoded to match it.
func (p Pattern) LooksAtArgs() bool { return p.args != argsAny }

// MatchesArgs reports whether p's argument part matches a's decoded arguments.
func (p Pattern) MatchesArgs(a *Args) bool {
	switch p.args {
	case argsAny:
		return true
	case argsPrimary:
		return p.primGlob.match(a.primaryRunes())
	case argsFields:
		for i := range p.conds {
			if !p.conds[i].holds(a.value) {
				return false
			}
		}
		return true
	}
	return false
}

func (c *fieldCondition) holds(v any) bool {
	return resolvePath(v, c.path, func(x any) bool {
		s := argValueString(x)
		switch c.op {
		case opGlob:
			return c.glob.matchString(s)
		case opNotGlob:
			return !c.glob.matchString(s)
		case opExact:
			return s == c.value
		case opNotExact:
			return s != c.value
		}
		return false
	})
}

// resolvePath calls pred on every value path reaches from v and reports whether pred held
// for any of them (it stops at the first). A path that reaches nothing yields false.
// Recursion depth is bounded by len(path) ≤ MaxPathDepth.
func resolvePath(v any, path []pathSeg, pred func(any) bool) bool {
	if len(path) == 0 {
		return pred(v)
	}
	seg, rest := path[0], path[1:]
	switch seg.kind {
	case segField:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		child, ok := m[seg.name]
		return ok && resolvePath(child, rest, pred)
	case segIndex:
		a, ok := v.([]any)
		return ok && seg.index < len(a) && resolvePath(a[seg.index], rest, pred)
	case segAnyIndex:
		a, _ := v.([]any)
		for _, child := range a {
			if resolvePath(child, rest, pred) {
				return true
			}
		}
	case segWildcard:
		m, _ := v.(map[string]any)
		for _, child := range m {
			if resolvePath(child, rest, pred) {
				return true
			}
		}
	}
	return false
}

// ErrInvalidArgs reports arguments that are not one JSON value.
var ErrInvalidArgs = errors.New("tool arguments are not valid JSON")

// Args is one call's arguments decoded for matching, shared by every rule evaluated
// against the call so that the work per call does not grow with the arguments' size times
// the number of rules. It is not safe for concurrent use; each evaluation has its own.
type Args struct {
	value   any
	primary []rune // the primary value, computed on first use
	hasPrim bool
}

// trimArgs returns the arguments without surrounding white space, or nil when they are
// empty or JSON null, which both count as {}.
func trimArgs(raw json.RawMessage) []byte {
	trimmed := bytes.TrimSpace(raw)
	if string(trimmed) == "null" {
		return nil
	}
	return trimmed
}

// ValidArgs reports whether raw is acceptable call arguments: empty, or one JSON value.
func ValidArgs(raw json.RawMessage) bool {
	trimmed := trimArgs(raw)
	return len(trimmed) == 0 || json.Valid(trimmed)
}

// DecodeArgs decodes call arguments for matching: numbers keep their JSON text, and
// empty or null arguments become an empty object.
func DecodeArgs(raw json.RawMessage) (*Args, error) {
	trimmed := trimArgs(raw)
	if len(trimmed) == 0 {
		return &Args{value: map[string]any{}}, nil
	}
	if !json.Valid(trimmed) {
		return nil, ErrInvalidArgs
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgs, err)
	}
	return &Args{value: v}, nil
}

// primaryRunes is the text a primary glob is matched against: the value of a one-key
// object, else the whole arguments.
func (a *Args) primaryRunes() []rune {
	if !a.hasPrim {
		s := ""
		if m, ok := a.value.(map[string]any); ok && len(m) == 1 {
			for _, x := range m {
				s = argValueString(x)
			}
		} else {
			s = argValueString(a.value)
		}
		a.primary, a.hasPrim = []rune(s), true
	}
	return a.primary
}

// argValueString renders a decoded JSON value as the string patterns compare against.
func argValueString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case json.Number:
		return string(t)
	}
	// An object or array as compact JSON without HTML escaping, as typeschema.Marshal
	// writes it; spelled here because a leaf of pkg/contracts imports only the standard
	// library (internal/archrules).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Unreachable for values produced by DecodeArgs; render nothing rather than
		// fail, which makes positive conditions false.
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Package apitokens reads the api's --api-tokens file: the named bearer tokens, the roles
// each may use, and the names no token may carry. The api authenticates with what it
// returns; the CLI loads the file for `awaken api` and `awaken dev` without linking the api.
package apitokens

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// MinTokenLength is the shortest token an --api-tokens file may hold (bytes).
const MinTokenLength = 16

// ErrRefused is wrapped by every refusal of [Load].
var ErrRefused = errors.New("api tokens file refused")

// Load reads an --api-tokens file: one "NAME TOKEN [ROLES]" per line (blank lines
// and lines starting with # are ignored). Names are the actors the api records for the
// requests their token authenticates; ROLES, a comma-separated list of [httpapi.Role]s
// ("approver,viewer"), limits what the token may do, and a line without it has every
// role (so a file written before roles existed keeps working). It returns the tokens by
// name and the roles of the names whose line gives some. A file is refused
// ([ErrRefused], the error names it) that holds no token at all (it would turn
// authentication off: with no token every request is anonymous), a token shorter than
// [MinTokenLength] bytes, a name or a token twice, a reserved name ([ReservedActor]: the
// names the api records for other doors), an unknown, repeated or empty role, or that
// other users may read or write (mode & 0o077: chmod 600 it).
func Load(path string) (map[string]string, map[string]RoleSet, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrRefused, path, fmt.Sprintf(format, args...))
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("api tokens: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, nil, refuse("mode %04o lets other users read or write the tokens; chmod 600 it", perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("api tokens: %w", err)
	}
	tokens := map[string]string{}
	roles := map[string]RoleSet{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 && len(f) != 3 {
			return nil, nil, refuse("line %d: want NAME TOKEN or NAME TOKEN ROLE,ROLE…", n)
		}
		name, token := f[0], f[1]
		if err := ValidActorName(name); err != nil {
			return nil, nil, refuse("line %d: %v", n, err)
		}
		if ReservedActor(name) {
			return nil, nil, refuse("line %d: name %q is reserved (the api records it for another door)", n, name)
		}
		if len(token) < MinTokenLength {
			return nil, nil, refuse("line %d: the token of %s has %d bytes, fewer than %d", n, name, len(token), MinTokenLength)
		}
		if _, dup := tokens[name]; dup || seen[token] {
			return nil, nil, refuse("line %d: duplicate name or token", n)
		}
		if len(f) == 3 {
			rs, err := ParseRoles(f[2])
			if err != nil {
				return nil, nil, refuse("line %d: roles of %s: %v", n, name, err)
			}
			roles[name] = rs
		}
		tokens[name], seen[token] = token, true
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("api tokens: %w", err)
	}
	if len(tokens) == 0 {
		return nil, nil, refuse("no token in the file; with none the api would require no authentication (leave --api-tokens unset for that)")
	}
	return tokens, roles, nil
}

// ReservedActor reports whether name is one the api records for a door other than a
// named token, so no token may carry it: [contracts.ReservedActor] — the single token's
// "api-token", "anonymous", the gate's "timer", "nats" and anything starting with it (the
// micro doors), "http" and "micro" (pause defaults), and anything starting with "claimed"
// (case-insensitive). The gate refuses the same names when a command on the public resume
// subject claims them.
func ReservedActor(name string) bool { return contracts.ReservedActor(name) }

// ValidActorName accepts 1 to 64 bytes of A-Z a-z 0-9 . _ @ - (a token's name or a NATS
// user in a subject token).
func ValidActorName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("name %q must have 1 to 64 bytes", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r)) {
			return fmt.Errorf("name %q may hold only A-Z a-z 0-9 . _ @ -", name)
		}
	}
	return nil
}

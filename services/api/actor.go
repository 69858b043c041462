package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// Who decided: every resume command the api publishes carries the actor its caller
// authenticated as, never a name the caller's body supplies, and goes on the subject only
// the api may publish (contracts.Names.TicketResumeAPISubject), so the gate records that
// actor as authenticated rather than claimed.
const (
	// SingleTokenName is the actor of a request authenticated by the single token of
	// --api-token (Options.Token).
	SingleTokenName = contracts.ActorSingleToken
	// AnonymousActor is the actor of an HTTP request when the api requires no token.
	AnonymousActor = contracts.ActorAnonymous
	// MicroActor is the actor of a micro request on the shared resolve subject, which
	// names no user (deploy/nats/auth.conf lets only admin send it). A request on
	// "{prefix}.api.tickets.resolve.{user}" is recorded as "nats:{user}".
	MicroActor = contracts.ActorNATS
)

// caller is who sent a request, as [Service.authenticate] established it: the actor (the
// token's name) and the roles of its token.
type caller struct {
	actor string
	roles RoleSet
}

type callerKey struct{}

// withCaller returns ctx carrying the authenticated caller of a request.
func withCaller(ctx context.Context, actor string, roles RoleSet) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{actor: actor, roles: roles})
}

// callerOf is the caller ctx carries: the zero caller (no actor, no role) when no
// authentication put one there.
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// actorOf is the authenticated actor ctx carries ("" for none).
func actorOf(ctx context.Context) string { return callerOf(ctx).actor }

// MinTokenLength is the shortest token an --api-tokens file may hold (bytes).
const MinTokenLength = 16

// ErrTokensFile is wrapped by every refusal of [LoadTokens].
var ErrTokensFile = errors.New("api tokens file refused")

// LoadTokens reads an --api-tokens file: one "NAME TOKEN [ROLES]" per line (blank lines
// and lines starting with # are ignored). Names are the actors the api records for the
// requests their token authenticates; ROLES, a comma-separated list of [httpapi.Role]s
// ("approver,viewer"), limits what the token may do, and a line without it has every
// role (so a file written before roles existed keeps working). It returns the tokens by
// name and the roles of the names whose line gives some. A file is refused
// ([ErrTokensFile], the error names it) that holds no token at all (it would turn
// authentication off: with no token every request is anonymous), a token shorter than
// [MinTokenLength] bytes, a name or a token twice, a reserved name ([ReservedActor]: the
// names the api records for other doors), an unknown, repeated or empty role, or that
// other users may read or write (mode & 0o077: chmod 600 it).
func LoadTokens(path string) (map[string]string, map[string]RoleSet, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrTokensFile, path, fmt.Sprintf(format, args...))
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
		if err := validActorName(name); err != nil {
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

// validActorName accepts 1 to 64 bytes of A-Z a-z 0-9 . _ @ - (a token's name or a NATS
// user in a subject token).
func validActorName(name string) error {
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

// tokenDigests are the configured tokens by name: Options.Tokens and the single token.
type tokenDigest struct {
	name   string
	digest [sha256.Size]byte
}

func digests(o Options) []tokenDigest {
	var out []tokenDigest
	if o.Token != "" {
		out = append(out, tokenDigest{SingleTokenName, sha256.Sum256([]byte(o.Token))})
	}
	for name, tok := range o.Tokens {
		out = append(out, tokenDigest{name, sha256.Sum256([]byte(tok))})
	}
	return out
}

// tokenName returns the name of the token r carries as a bearer token, comparing it in
// constant time with every configured token. With none configured every request is
// AnonymousActor.
func (s *Service) tokenName(r *http.Request) (string, bool) {
	if len(s.tokens) == 0 {
		return AnonymousActor, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	name := ""
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(got[:], t.digest[:]) == 1 {
			name = t.name
		}
	}
	return name, ok && strings.EqualFold(scheme, "Bearer") && name != ""
}

// microUserActor is the actor of a micro resolve request on subject: "nats:{user}" when it
// was sent on the per-user subject "{group}.tickets.resolve.{user}" (the NATS server lets
// only the users auth.conf grants it publish there), else [MicroActor].
func (s *Service) microUserActor(subject string) string {
	prefix := httpapi.MicroSubject(s.env.Names.Prefix, httpapi.EndpointTicketsResolve) + "."
	if user, ok := strings.CutPrefix(subject, prefix); ok && validActorName(user) == nil {
		return MicroActor + ":" + user
	}
	return MicroActor
}

// combineActor is the actor recorded for a command whose caller authenticated as
// authenticated and named claimed in the command itself: the authenticated name always,
// followed by " as {claimed}" when the claim differs, so a claim never hides who sent it.
func combineActor(authenticated, claimed string) string {
	if claimed == "" || claimed == authenticated {
		return authenticated
	}
	a := authenticated + " as " + claimed
	if len(a) > contracts.MaxActorLength {
		// Cut at a rune boundary: the command must stay valid UTF-8 within the bound.
		a = strings.ToValidUTF8(a[:contracts.MaxActorLength], "")
	}
	return a
}

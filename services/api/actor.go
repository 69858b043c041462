package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/awaken-dev/awaken/internal/apitokens"
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
	roles apitokens.RoleSet
}

type callerKey struct{}

// withCaller returns ctx carrying the authenticated caller of a request.
func withCaller(ctx context.Context, actor string, roles apitokens.RoleSet) context.Context {
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
	if user, ok := strings.CutPrefix(subject, prefix); ok && apitokens.ValidActorName(user) == nil {
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

// rolesOf is the roles of the caller ctx carries: none when no authentication put one
// there.
func rolesOf(ctx context.Context) apitokens.RoleSet { return callerOf(ctx).roles }

// tokenRoles is the role set of the token named name: the one its --api-tokens line
// gives, else every role (a line without roles, the single token, anonymous).
func (s *Service) tokenRoles(name string) apitokens.RoleSet {
	if r, ok := s.opts.TokenRoles[name]; ok {
		return r
	}
	return apitokens.EveryRole
}

// requireRole refuses a request authenticated by [Service.authenticate] whose token
// carries none of roles: a 403 missing_role *httpapi.Error naming the roles needed and those the
// token has. A route of the HTTP api (and any route added beside them, such as another
// door on the same server) calls it before doing anything.
func (s *Service) requireRole(r *http.Request, roles ...httpapi.Role) error {
	have := rolesOf(r.Context())
	for _, want := range roles {
		if have.Has(want) {
			return nil
		}
	}
	names := make([]string, len(roles))
	for i, want := range roles {
		names[i] = string(want)
	}
	hasText := have.String()
	if hasText == "" {
		hasText = "none"
	}
	route := r.Pattern
	if route == "" {
		route = r.Method + " " + r.URL.Path
	}
	return apiErr(http.StatusForbidden, httpapi.CodeMissingRole, "%s needs the role %s; the token of %s has %s",
		route, strings.Join(names, " or "), actorOf(r.Context()), hasText)
}

func (s *Service) httpSession(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	writeJSON(w, http.StatusOK, httpapi.Session{Actor: c.actor, Roles: c.roles.List()})
}

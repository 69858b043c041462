package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Roles limit what a named token may do. An --api-tokens line may name them after the
// token ("alice TOKEN approver,viewer"); a line without them, the single --api-token and
// an api that requires no token have every role, as before roles existed.

// Role is one right a token may carry.
type Role string

const (
	// RoleViewer reads: tickets, batches, results, the event stream, the tool catalog,
	// stored outputs.
	RoleViewer Role = "viewer"
	// RoleApprover approves and denies tickets.
	RoleApprover Role = "approver"
	// RoleOperator pauses and resumes tools (the kill switch) and cancels runs.
	RoleOperator Role = "operator"
	// RoleSubmitter submits batches (the batch door) and reads what a platform loop needs:
	// results, the tool catalog and stored outputs.
	RoleSubmitter Role = "submitter"
)

// AllRoles are every role, in the order they are listed.
var AllRoles = []Role{RoleViewer, RoleApprover, RoleOperator, RoleSubmitter}

// RoleSet is a set of roles.
type RoleSet uint8

// EveryRole is the set of a token that names no roles.
const EveryRole RoleSet = 1<<len(roleBits) - 1

var roleBits = [...]Role{RoleViewer, RoleApprover, RoleOperator, RoleSubmitter}

func roleBit(r Role) RoleSet {
	i := slices.Index(roleBits[:], r)
	if i < 0 {
		return 0
	}
	return 1 << i
}

// RolesOf is the set of roles.
func RolesOf(roles ...Role) RoleSet {
	var s RoleSet
	for _, r := range roles {
		s |= roleBit(r)
	}
	return s
}

// Has reports whether s holds r.
func (s RoleSet) Has(r Role) bool { b := roleBit(r); return b != 0 && s&b != 0 }

// List is s's roles in [AllRoles] order.
func (s RoleSet) List() []Role {
	out := []Role{}
	for _, r := range AllRoles {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// String is s's roles joined by commas.
func (s RoleSet) String() string {
	names := make([]string, 0, len(AllRoles))
	for _, r := range s.List() {
		names = append(names, string(r))
	}
	return strings.Join(names, ",")
}

// ParseRoles reads a comma-separated list of roles ("approver,viewer"). Every name must
// be a [Role], at least one is needed, and none may repeat.
func ParseRoles(list string) (RoleSet, error) {
	var s RoleSet
	for name := range strings.SplitSeq(list, ",") {
		r := Role(strings.TrimSpace(name))
		b := roleBit(r)
		switch {
		case r == "":
			return 0, fmt.Errorf("empty role in %q", list)
		case b == 0:
			return 0, fmt.Errorf("unknown role %q (want viewer, approver, operator or submitter)", r)
		case s&b != 0:
			return 0, fmt.Errorf("role %q named twice", r)
		}
		s |= b
	}
	return s, nil
}

type rolesKey struct{}

// withRoles returns ctx carrying the roles of the request's token.
func withRoles(ctx context.Context, roles RoleSet) context.Context {
	return context.WithValue(ctx, rolesKey{}, roles)
}

// rolesOf is the roles ctx carries: none when no authentication put any there.
func rolesOf(ctx context.Context) RoleSet {
	r, _ := ctx.Value(rolesKey{}).(RoleSet)
	return r
}

// tokenRoles is the role set of the token named name: the one its --api-tokens line
// gives, else every role (a line without roles, the single token, anonymous).
func (s *Service) tokenRoles(name string) RoleSet {
	if r, ok := s.opts.TokenRoles[name]; ok {
		return r
	}
	return EveryRole
}

// CodeMissingRole (403): the request's token does not carry a role the route needs.
const CodeMissingRole = "missing_role"

// requireRole refuses a request authenticated by [Service.authenticate] whose token
// carries none of roles: a 403 missing_role *Error naming the roles needed and those the
// token has. A route of the HTTP api (and any route added beside them, such as another
// door on the same server) calls it before doing anything.
func (s *Service) requireRole(r *http.Request, roles ...Role) error {
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
	return apiErr(http.StatusForbidden, CodeMissingRole, "%s needs the role %s; the token of %s has %s",
		route, strings.Join(names, " or "), actorOf(r.Context()), hasText)
}

// Session is the reply of GET /v1/session: who the request's token authenticates, and
// its roles, so the console shows only the controls the token may use.
type Session struct {
	Actor string `json:"actor"`
	Roles []Role `json:"roles"`
}

func (s *Service) httpSession(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Session{Actor: actorOf(r.Context()), Roles: rolesOf(r.Context()).List()})
}

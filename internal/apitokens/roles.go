package apitokens

import (
	"fmt"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// Roles limit what a named token may do. An --api-tokens line may name them after the
// token ("alice TOKEN approver,viewer"); a line without them, the single --api-token and
// an api that requires no token have every role, as before roles existed.

// RoleSet is a set of roles.
type RoleSet uint8

// EveryRole is the set of a token that names no roles.
const EveryRole RoleSet = 1<<len(roleBits) - 1

var roleBits = [...]httpapi.Role{httpapi.RoleViewer, httpapi.RoleApprover, httpapi.RoleOperator, httpapi.RoleSubmitter}

func roleBit(r httpapi.Role) RoleSet {
	i := slices.Index(roleBits[:], r)
	if i < 0 {
		return 0
	}
	return 1 << i
}

// RolesOf is the set of roles.
func RolesOf(roles ...httpapi.Role) RoleSet {
	var s RoleSet
	for _, r := range roles {
		s |= roleBit(r)
	}
	return s
}

// Has reports whether s holds r.
func (s RoleSet) Has(r httpapi.Role) bool { b := roleBit(r); return b != 0 && s&b != 0 }

// List is s's roles in [httpapi.AllRoles] order.
func (s RoleSet) List() []httpapi.Role {
	out := []httpapi.Role{}
	for _, r := range httpapi.AllRoles {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// String is s's roles joined by commas.
func (s RoleSet) String() string {
	names := make([]string, 0, len(httpapi.AllRoles))
	for _, r := range s.List() {
		names = append(names, string(r))
	}
	return strings.Join(names, ",")
}

// ParseRoles reads a comma-separated list of roles ("approver,viewer"). Every name must
// be a [httpapi.Role], at least one is needed, and none may repeat.
func ParseRoles(list string) (RoleSet, error) {
	var s RoleSet
	for name := range strings.SplitSeq(list, ",") {
		r := httpapi.Role(strings.TrimSpace(name))
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

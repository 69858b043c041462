package contracts

// ToolAnnotations are the behaviour hints an MCP server gives for one of its tools
// (the MCP specification's ToolAnnotations, without its title). Every field is optional;
// an absent field takes the specification's default, which is the cautious reading:
//
//	readOnlyHint     false  (the tool may modify its environment)
//	destructiveHint  true   (its modifications may be destructive; meaningful only when
//	                        readOnlyHint is false)
//	idempotentHint   false  (repeating it may have an additional effect)
//	openWorldHint    true   (it may reach an open world of external entities)
//
// The specification says clients must not base decisions on annotations from untrusted
// servers: the host uses them only for the MCP servers its configuration marks
// trust_annotations (see [ToolAnnotations.DefaultBehavior] and
// [ToolAnnotations.ReplaySafe]).
type ToolAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

func hint(v *bool, def bool) bool {
	if v == nil {
		return def
	}
	return *v
}

// ReadOnly is readOnlyHint with its default (false).
func (a ToolAnnotations) ReadOnly() bool { return hint(a.ReadOnlyHint, false) }

// Destructive is destructiveHint with its default (true); a read-only tool is never
// destructive, since the hint is meaningful only when readOnlyHint is false.
func (a ToolAnnotations) Destructive() bool { return !a.ReadOnly() && hint(a.DestructiveHint, true) }

// Idempotent is idempotentHint with its default (false).
func (a ToolAnnotations) Idempotent() bool { return hint(a.IdempotentHint, false) }

// OpenWorld is openWorldHint with its default (true).
func (a ToolAnnotations) OpenWorld() bool { return hint(a.OpenWorldHint, true) }

// DefaultBehavior is the behaviour the annotations give a call of the tool that no host
// rule matches: allow for a read-only tool, ask for a destructive one, and none ("") when
// neither holds (a tool declared not read-only and not destructive), which leaves the
// host's default_behavior in force. Because destructiveHint defaults to true, a tool that
// declares nothing is asked for.
func (a ToolAnnotations) DefaultBehavior() PolicyBehavior {
	switch {
	case a.ReadOnly():
		return BehaviorAllow
	case a.Destructive():
		return BehaviorAsk
	}
	return ""
}

// ReplaySafe reports whether the annotations let a call of the tool be replayed after a
// crash: idempotentHint true and openWorldHint explicitly false. Since openWorldHint
// defaults to true, an idempotent tool that does not say its world is closed may reach
// external systems that do not share its idempotence, and is not replay-safe.
func (a ToolAnnotations) ReplaySafe() bool { return a.Idempotent() && !a.OpenWorld() }

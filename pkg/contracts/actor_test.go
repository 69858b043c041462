package contracts

import (
	"errors"
	"testing"
)

// TestReservedActor: the names the doors and the gate record, in any case, alone, padded
// or as the first word, are reserved; names that merely resemble them are not.
func TestReservedActor(t *testing.T) {
	for _, name := range []string{"timer", "TIMER", " timer", "timer (expired)", "anonymous", "api-token", "http", "micro",
		"nats", "nats:admin", "NATS:admin as bob", "natsuser", "claimed", "Claimed:alice", "claimed-bob"} {
		if !ReservedActor(name) {
			t.Errorf("ReservedActor(%q) = false", name)
		}
		if err := CheckClaimedActor(name); !errors.Is(err, ErrReservedActor) {
			t.Errorf("CheckClaimedActor(%q) = %v, want reserved_actor", name, err)
		}
	}
	for _, name := range []string{"", "alice", "timothy", "cli:bob", "bob as timer", "platform-bot", "unclaimed", "a nats user"} {
		if ReservedActor(name) {
			t.Errorf("ReservedActor(%q) = true", name)
		}
		if err := CheckClaimedActor(name); err != nil {
			t.Errorf("CheckClaimedActor(%q) = %v", name, err)
		}
	}
}

func TestActorText(t *testing.T) {
	for _, tc := range []struct {
		actor   string
		claimed bool
		want    string
	}{
		{"alice", false, "alice"}, {"alice", true, "alice (claimed)"}, {"", true, "(unnamed, claimed)"}, {"", false, ""},
	} {
		if got := ActorText(tc.actor, tc.claimed); got != tc.want {
			t.Errorf("ActorText(%q, %v) = %q, want %q", tc.actor, tc.claimed, got, tc.want)
		}
	}
}

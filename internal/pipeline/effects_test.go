package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/awaken-dev/awaken/internal/bus"
)

// TestHandleDecidesAgainAfterALostRace: a commit that lost its compare-and-swap wrote
// nothing, so the handler decides again at once from what the winner left, and the
// delivery succeeds; a handler that loses every time returns a transient error.
func TestHandleDecidesAgainAfterALostRace(t *testing.T) {
	env := &Env{}
	decisions := 0
	h := env.Handle("test", func(context.Context, bus.Delivery) (Effects, error) {
		decisions++
		attempt := decisions
		return Effects{Op: "op", Steps: []Effect{Commit(func(context.Context) (bool, error) {
			if attempt < 3 {
				return false, ErrRaced
			}
			return true, nil
		})}}, nil
	})
	if err := h(context.Background(), bus.Delivery{}); err != nil {
		t.Fatalf("handle: %v", err)
	}
	if decisions != 3 {
		t.Fatalf("decided %d times, want 3 (two lost races, then the commit)", decisions)
	}

	always := env.Handle("test", func(context.Context, bus.Delivery) (Effects, error) {
		return Effects{Steps: []Effect{Do(func(context.Context) error { return ErrRaced })}}, nil
	})
	err := always(context.Background(), bus.Delivery{})
	if !errors.Is(err, ErrRaced) || bus.IsPermanent(err) {
		t.Fatalf("a handler that always loses: %v, want a transient ErrRaced", err)
	}
}

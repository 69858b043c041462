package executor_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// TestTheToolVocabularyIsOneDefinition: executor.Invocation, tool.Invocation and the
// executor core's Invocation are one type, and so are executor.Tool and tool.Tool — a
// second definition (a copy with the same fields) would fail here, not at a user's
// conversion.
func TestTheToolVocabularyIsOneDefinition(t *testing.T) {
	inv := reflect.TypeFor[executor.Invocation]()
	if inv != reflect.TypeFor[tool.Invocation]() || inv != reflect.TypeFor[execcore.Invocation]() {
		t.Errorf("Invocation: executor %v, tool %v, execcore %v are not one type",
			inv, reflect.TypeFor[tool.Invocation](), reflect.TypeFor[execcore.Invocation]())
	}
	if reflect.TypeFor[executor.Tool[shoutArgs, string]]() != reflect.TypeFor[tool.Tool[shoutArgs, string]]() {
		t.Error("executor.Tool and tool.Tool are not one type")
	}
	if reflect.TypeFor[executor.Reconciler[shoutArgs]]() != reflect.TypeFor[tool.Reconciler[shoutArgs]]() {
		t.Error("executor.Reconciler and tool.Reconciler are not one type")
	}
	// A tool built with either package registers with the executor.
	_, x := newShoutExecutor(t)
	if err := executor.Register(x, tool.ToolFunc("shout", "Shouts.", contracts.CapabilityReplaySafe, shout)); err != nil {
		t.Fatal(err)
	}
	ctx := executor.WithInvocation(context.Background(), executor.Invocation{OperationID: contracts.OperationID("r", 1, "c")})
	if got, want := executor.IdempotencyKey(ctx), tool.IdempotencyKey(ctx); got != want || got == "" {
		t.Errorf("IdempotencyKey: executor %q, tool %q", got, want)
	}
}

package executor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor"
)

type shoutArgs struct {
	Text string `json:"text" desc:"The text to shout."`
}

func shout(_ context.Context, a shoutArgs) (string, error) { return strings.ToUpper(a.Text), nil }

// newShoutExecutor is an executor configured for the shout tool that never connects: the
// tests register tools with it, they do not run them.
func newShoutExecutor(t *testing.T) (*executor.Config, *executor.Executor) {
	t.Helper()
	cfg, err := executor.ParseConfig([]byte("tools:\n  - id: shout\n"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(cfg, executor.Options{URL: "nats://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, x
}

// TestRegisterDerivesTheSchemaAndRefusesDuplicates: a typed tool's descriptor comes from
// its argument type, and a second registration of an id is refused with ErrDuplicateTool.
func TestRegisterDerivesTheSchemaAndRefusesDuplicates(t *testing.T) {
	cfg, x := newShoutExecutor(t)
	tool := executor.ToolFunc("shout", "Shouts.", contracts.CapabilityReplaySafe, shout)
	if err := executor.Register(x, tool); err != nil {
		t.Fatal(err)
	}
	if d := x.Descriptors(); len(d) != 1 || d[0].ID != "shout" || !strings.Contains(string(d[0].Parameters), `"text"`) {
		t.Errorf("descriptors %+v, want shout's schema from shoutArgs", d)
	}
	if err := executor.Register(x, tool); !errors.Is(err, executor.ErrDuplicateTool) {
		t.Errorf("second registration: %v, want ErrDuplicateTool", err)
	}
	if err := executor.Register(x, executor.ToolFunc("", "", contracts.CapabilityReplaySafe, shout)); !errors.Is(err, executor.ErrInvalidTool) {
		t.Errorf("empty id: %v, want ErrInvalidTool", err)
	}
	if _, err := executor.New(cfg, executor.Options{URL: "nats://x", User: "u", Token: "t"}); err == nil {
		t.Error("two credentials accepted")
	}
}

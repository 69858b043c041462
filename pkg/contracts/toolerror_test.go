package contracts

import (
	"errors"
	"fmt"
	"testing"
)

func TestToolErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  *ToolError
		kind ToolErrorKind
		want string
	}{
		{"unknown tool", ErrUnknownTool("wc"), ToolErrorUnknown, "unknown tool: wc"},
		{"invalid arguments", InvalidArguments(`missing required field "text"`), ToolErrorInvalidArguments, `invalid tool arguments: missing required field "text"`},
		{"unavailable before dispatch", UnavailableBeforeDispatch("hand channel closed before dispatch"), ToolErrorUnavailableBeforeDispatch, "tool executor unavailable before dispatch: hand channel closed before dispatch"},
		{"execution", ExecutionFailed("exit 1"), ToolErrorExecution, "tool execution failed: exit 1"},
		{"unrecognised kind renders as execution", &ToolError{Kind: "weird", Msg: "x"}, "weird", "tool execution failed: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Kind != tt.kind {
				t.Fatalf("kind %q, want %q", tt.err.Kind, tt.kind)
			}
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
			out := tt.err.Output("call-1")
			if !out.IsError || out.CallID != "call-1" || out.Text() != tt.want {
				t.Fatalf("Output() = %+v", out)
			}
		})
	}
}

func TestErrorToOutput(t *testing.T) {
	wrapped := fmt.Errorf("remote hand: %w", ErrUnknownTool("x"))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"tool error in chain keeps its kind", wrapped, "unknown tool: x"},
		{"plain error is an execution failure", errors.New("disk full"), "tool execution failed: disk full"},
		{"nil error is still an error", nil, "tool execution failed: the tool reported a failure without an error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := ErrorToOutput("c", tt.err)
			if !out.IsError || out.Text() != tt.want {
				t.Fatalf("got %+v, want error %q", out, tt.want)
			}
		})
	}
}

func TestIsUnavailableBeforeDispatch(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"direct", UnavailableBeforeDispatch("closed"), true},
		{"wrapped", fmt.Errorf("hand: %w", UnavailableBeforeDispatch("closed")), true},
		{"execution is not proof", ExecutionFailed("reply lost"), false},
		{"unknown tool", ErrUnknownTool("x"), false},
		{"plain error", errors.New("closed before dispatch"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsUnavailableBeforeDispatch(tt.err); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

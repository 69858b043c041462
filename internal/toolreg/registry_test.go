package toolreg_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// weatherArgs is a typed tool's argument type: its schema is what the model sees and what
// decoding enforces.
type weatherArgs struct {
	City  string `json:"city" desc:"City name."`
	Units string `json:"units,omitempty" jsonschema:"enum=metric|imperial"`
	Days  int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
}

type forecast struct {
	City string `json:"city"`
	Temp int    `json:"temp"`
}

// weather is a Tool implemented as a type (not ToolFunc).
type weather struct{}

func (weather) ID() string                                   { return "weather" }
func (weather) Description() string                          { return "Forecast for a city." }
func (weather) Capability() contracts.ToolRecoveryCapability { return contracts.CapabilityReplaySafe }
func (weather) Call(_ context.Context, a weatherArgs) (forecast, error) {
	if a.City == "Atlantis" {
		return forecast{}, errors.New("city is under water")
	}
	return forecast{City: a.City, Temp: 21}, nil
}

func invoke(t *testing.T, r *toolreg.Registry, toolID, args string) (contracts.ToolOutput, error) {
	t.Helper()
	inv := tool.Invocation{RunID: "run-1", Step: 1, CallID: "call_1", OperationID: "tool-batch:run-1:1:call_1",
		ToolID: toolID, Arguments: json.RawMessage(args), Attempt: 1}
	return r.Invoke(tool.WithInvocation(context.Background(), inv), inv)
}

// outcomeText is what the model would see: the output's text, or the error's.
func outcomeText(out contracts.ToolOutput, err error) string {
	if err != nil {
		return contracts.ErrorToOutput("call_1", err).Text()
	}
	return out.Text()
}

func TestTypedToolDescriptorComesFromTheArgumentType(t *testing.T) {
	r := toolreg.NewRegistry()
	if err := toolreg.Register(r, weather{}); err != nil {
		t.Fatal(err)
	}
	descs := r.Descriptors()
	if len(descs) != 1 || descs[0].ID != "weather" || descs[0].Description != "Forecast for a city." {
		t.Fatalf("descriptors %+v", descs)
	}
	var schema struct {
		Type                 string                     `json:"type"`
		Required             []string                   `json:"required"`
		AdditionalProperties bool                       `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(descs[0].Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Required) != 1 || schema.Required[0] != "city" || schema.AdditionalProperties {
		t.Errorf("schema %s", descs[0].Parameters)
	}
	if !strings.Contains(string(schema.Properties["units"]), `"enum":["metric","imperial"]`) ||
		!strings.Contains(string(schema.Properties["city"]), `"description":"City name."`) {
		t.Errorf("property keywords missing from %s", descs[0].Parameters)
	}
	if c, ok := r.Capability("weather"); !ok || c != contracts.CapabilityReplaySafe {
		t.Errorf("capability %q %v", c, ok)
	}
}

func TestTypedToolArgumentsAndRendering(t *testing.T) {
	r := toolreg.NewRegistry()
	must(t, toolreg.Register(r, weather{}))
	must(t, toolreg.Register(r, tool.ToolFunc("opt", "All optional.", "",
		func(_ context.Context, a struct {
			N *int `json:"n"`
		}) (string, error) {
			if a.N == nil {
				return "no n", nil
			}
			return "n set", nil
		})))
	must(t, toolreg.Register(r, tool.ToolFunc("image", "Returns an output as is.", contracts.CapabilityReplaySafe,
		func(context.Context, struct{}) (contracts.ToolOutput, error) {
			return contracts.BlocksOutput("", []contracts.ContentBlock{{Type: contracts.BlockImage,
				Source: &contracts.ImageSource{Type: "url", URL: "https://example.com/a.png"}}}, false), nil
		})))
	must(t, toolreg.Register(r, tool.ToolFunc("pointer", "Returns *ToolOutput.", contracts.CapabilityReplaySafe,
		func(context.Context, struct{}) (*contracts.ToolOutput, error) {
			out := contracts.ErrorOutput("", "explicit failure")
			return &out, nil
		})))
	must(t, toolreg.Register(r, tool.ToolFunc("unavailable", "Not reachable.", contracts.CapabilityReplaySafe,
		func(context.Context, struct{}) (string, error) {
			return "", contracts.UnavailableBeforeDispatch("backend down")
		})))
	must(t, toolreg.Register(r, tool.ToolFunc("wrapped", "Wraps a tool error.", contracts.CapabilityReplaySafe,
		func(context.Context, struct{}) (string, error) {
			return "", errors.Join(errors.New("context"), contracts.InvalidArguments("bad date"))
		})))

	tests := []struct {
		name, tool, args string
		want             string
		wantErrKind      contracts.ToolErrorKind
	}{
		{"struct output as JSON text", "weather", `{"city":"Paris"}`, `{"city":"Paris","temp":21}`, ""},
		{"wrong type", "weather", `{"city":7}`, "invalid tool arguments: ", contracts.ToolErrorInvalidArguments},
		{"unknown field", "weather", `{"city":"Paris","country":"FR"}`, "invalid tool arguments: ", contracts.ToolErrorInvalidArguments},
		{"missing required", "weather", `{}`, "invalid tool arguments: ", contracts.ToolErrorInvalidArguments},
		{"enum violated", "weather", `{"city":"Paris","units":"kelvin"}`, "invalid tool arguments: ", contracts.ToolErrorInvalidArguments},
		{"bound violated", "weather", `{"city":"Paris","days":9}`, "invalid tool arguments: ", contracts.ToolErrorInvalidArguments},
		{"not an object", "weather", `[1]`, "invalid tool arguments: ", contracts.ToolErrorInvalidArguments},
		{"plain error becomes execution", "weather", `{"city":"Atlantis"}`, "tool execution failed: city is under water", contracts.ToolErrorExecution},
		{"null arguments mean {}", "opt", `null`, "no n", ""},
		{"empty arguments mean {}", "opt", ``, "no n", ""},
		{"optional field set", "opt", `{"n":1}`, "n set", ""},
		{"tool output as is", "image", `{}`, "", ""},
		{"pointer output as is", "pointer", `{}`, "explicit failure", ""},
		{"unavailable kept", "unavailable", `{}`, "tool executor unavailable before dispatch: backend down", contracts.ToolErrorUnavailableBeforeDispatch},
		{"tool error found in chain", "wrapped", `{}`, "invalid tool arguments: bad date", contracts.ToolErrorInvalidArguments},
		{"unknown tool", "nope", `{}`, "unknown tool: nope", contracts.ToolErrorUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := invoke(t, r, tt.tool, tt.args)
			got := outcomeText(out, err)
			if !strings.HasPrefix(got, tt.want) || (!strings.HasSuffix(tt.want, ": ") && got != tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			var te *contracts.ToolError
			switch {
			case tt.wantErrKind == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantErrKind != "" && (!errors.As(err, &te) || te.Kind != tt.wantErrKind):
				t.Errorf("error %v, want kind %s", err, tt.wantErrKind)
			}
		})
	}
	out, _ := invoke(t, r, "image", `{}`)
	if len(out.Content) != 1 || out.Content[0].Type != contracts.BlockImage {
		t.Errorf("image output %+v", out)
	}
	out, _ = invoke(t, r, "pointer", `{}`)
	if !out.IsError {
		t.Errorf("explicit error output lost its flag: %+v", out)
	}
}

func TestDuplicateIDIsPermanentlyAmbiguous(t *testing.T) {
	r := toolreg.NewRegistry()
	echo := tool.ToolFunc("echo", "one", contracts.CapabilityReplaySafe, func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	})
	must(t, toolreg.Register(r, echo))
	for i := range 2 {
		if err := toolreg.Register(r, echo); !errors.Is(err, toolreg.ErrDuplicateTool) {
			t.Fatalf("registration %d: error %v, want ErrDuplicateTool", i+2, err)
		}
	}
	out, err := invoke(t, r, "echo", `{"text":"hi"}`)
	if got := outcomeText(out, err); got != "tool execution failed: tool id `echo` is ambiguous" {
		t.Errorf("got %q", got)
	}
	if d := r.Descriptors(); len(d) != 0 {
		t.Errorf("an ambiguous tool is described: %+v", d)
	}
	raw := contracts.ToolDescriptor{ID: "echo", Parameters: json.RawMessage(`{}`)}
	if err := toolreg.RegisterRaw(r, raw, "", func(context.Context, json.RawMessage) (contracts.ToolOutput, error) {
		return contracts.TextOutput("", "raw"), nil
	}); !errors.Is(err, toolreg.ErrDuplicateTool) {
		t.Errorf("raw registration over an ambiguous id: %v", err)
	}
}

func TestRegisterRaw(t *testing.T) {
	r := toolreg.NewRegistry()
	var got string
	must(t, toolreg.RegisterRaw(r, contracts.ToolDescriptor{ID: "mcp__gh__issue", Description: "Opens an issue.",
		Parameters: json.RawMessage(`{"properties":{"title":{"type":"string"}}}`)}, contracts.CapabilityNonRecoverable,
		func(_ context.Context, args json.RawMessage) (contracts.ToolOutput, error) {
			got = string(args)
			return contracts.TextOutput("", "opened"), nil
		}))
	out, err := invoke(t, r, "mcp__gh__issue", `null`)
	if outcomeText(out, err) != "opened" || got != "{}" {
		t.Errorf("output %q, args %q", outcomeText(out, err), got)
	}
	out, err = invoke(t, r, "mcp__gh__issue", `{bad`)
	if !strings.HasPrefix(outcomeText(out, err), "invalid tool arguments: ") {
		t.Errorf("invalid JSON: %q", outcomeText(out, err))
	}
	d := r.Descriptors()
	if len(d) != 1 || !strings.Contains(string(d[0].Parameters), `"type":"object"`) || d[0].Kind != contracts.KindRegular {
		t.Errorf("descriptor %+v (%s)", d, d[0].Parameters)
	}
}

func TestInvalidRegistrations(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	tests := []struct {
		name string
		reg  func(r *toolreg.Registry) error
	}{
		{"empty id", func(r *toolreg.Registry) error {
			return toolreg.Register(r, tool.ToolFunc("", "x", "", noop))
		}},
		{"bad capability", func(r *toolreg.Registry) error {
			return toolreg.Register(r, tool.ToolFunc("t", "x", "sometimes", noop))
		}},
		{"arguments not an object", func(r *toolreg.Registry) error {
			return toolreg.Register(r, tool.ToolFunc("t", "x", "", func(context.Context, string) (string, error) { return "", nil }))
		}},
		{"arguments without a JSON form", func(r *toolreg.Registry) error {
			return toolreg.Register(r, tool.ToolFunc("t", "x", "", func(context.Context, struct {
				C chan int `json:"c"`
			}) (string, error) {
				return "", nil
			}))
		}},
		{"nil tool", func(r *toolreg.Registry) error {
			return toolreg.Register[struct{}, string](r, nil)
		}},
		{"raw schema not an object", func(r *toolreg.Registry) error {
			return toolreg.RegisterRaw(r, contracts.ToolDescriptor{ID: "t", Parameters: json.RawMessage(`{"type":"array"}`)}, "",
				func(context.Context, json.RawMessage) (contracts.ToolOutput, error) {
					return contracts.ToolOutput{}, nil
				})
		}},
		{"raw nil function", func(r *toolreg.Registry) error {
			return toolreg.RegisterRaw(r, contracts.ToolDescriptor{ID: "t"}, "", nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := toolreg.NewRegistry()
			if err := tt.reg(r); !errors.Is(err, toolreg.ErrInvalidTool) {
				t.Fatalf("error %v, want ErrInvalidTool", err)
			}
			if r.Has("t") || len(r.Descriptors()) != 0 {
				t.Error("a failed registration left a tool behind")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkBrainInvoke measures the warm path of one call through the typed adapter —
// lookup, strict argument decoding against the derived schema, the body, and output
// rendering as JSON text — without NATS.
func BenchmarkBrainInvoke(b *testing.B) {
	r := toolreg.NewRegistry()
	if err := toolreg.Register(r, weather{}); err != nil {
		b.Fatal(err)
	}
	inv := tool.Invocation{RunID: "run-1", Step: 1, CallID: "call_1", OperationID: "tool-batch:run-1:1:call_1",
		ToolID: "weather", Arguments: json.RawMessage(`{"city":"Paris","units":"metric","days":3}`), Attempt: 1}
	ctx := tool.WithInvocation(context.Background(), inv)
	b.ReportAllocs()
	for b.Loop() {
		out, err := r.Invoke(ctx, inv)
		if err != nil || len(out.Content) != 1 {
			b.Fatalf("%v %+v", err, out)
		}
	}
}

package contracts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func imageBlock() ContentBlock {
	return ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: "image/png", Data: tinyPNG}}
}

func TestOutputConstructors(t *testing.T) {
	tests := []struct {
		name    string
		out     ToolOutput
		isError bool
		text    string
	}{
		{"text output is ok", TextOutput("c1", "hello"), false, "hello"},
		{"error output is an error", ErrorOutput("c1", "boom"), true, "boom"},
		{"blocks output keeps the flag", BlocksOutput("c1", []ContentBlock{{Type: BlockText, Text: "x"}}, true), true, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.out.CallID != "c1" || tt.out.IsError != tt.isError || tt.out.Text() != tt.text {
				t.Fatalf("got %+v, want call c1 error=%v text %q", tt.out, tt.isError, tt.text)
			}
		})
	}
}

func TestBlocksOutputCopiesItsInput(t *testing.T) {
	blocks := []ContentBlock{{Type: BlockText, Text: "before"}}
	out := BlocksOutput("c1", blocks, false)
	blocks[0].Text = "after"
	if out.Text() != "before" {
		t.Fatalf("output aliases the caller's slice: %q", out.Text())
	}
	if nilOut := BlocksOutput("c1", nil, false); nilOut.Content == nil {
		t.Fatal("nil blocks must become an empty slice")
	}
}

func TestWithStateDoesNotAlias(t *testing.T) {
	set := Command{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet, Value: json.RawMessage(`1`)}}
	base := TextOutput("c1", "x").WithState(set)
	a := base.WithState(Command{Key: "a", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove}})
	b := base.WithState(Command{Key: "b", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove}})
	if len(base.State) != 1 || len(a.State) != 2 || len(b.State) != 2 {
		t.Fatalf("lengths: base %d a %d b %d", len(base.State), len(a.State), len(b.State))
	}
	if a.State[1].Key != "a" || b.State[1].Key != "b" {
		t.Fatalf("WithState results share a backing array: a=%q b=%q", a.State[1].Key, b.State[1].Key)
	}
}

func TestTextViewExcludesImagesAndIncludesNestedResults(t *testing.T) {
	out := BlocksOutput("c1", []ContentBlock{
		{Type: BlockText, Text: "first"},
		imageBlock(),
		{Type: BlockToolUse, ID: "u1", Name: "echo", Input: json.RawMessage(`{"text":"ignored"}`)},
		{Type: BlockToolResult, ToolUseID: "u1", Content: []ContentBlock{
			{Type: BlockText, Text: "nested"},
			imageBlock(),
			{Type: BlockToolResult, ToolUseID: "u2", Content: []ContentBlock{{Type: BlockText, Text: "deeper"}}},
		}},
		{Type: BlockText, Text: "last"},
	}, false)
	if got, want := out.Text(), "first\nnested\ndeeper\nlast"; got != want {
		t.Fatalf("Text() = %q, want %q", got, want)
	}
	if strings.Contains(out.Text(), tinyPNG) {
		t.Fatal("Text() leaked image data")
	}
}

func TestMultimodalOutputRoundTrips(t *testing.T) {
	out := BlocksOutput("c1", []ContentBlock{
		{Type: BlockText, Text: "a chart"},
		imageBlock(),
		{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "https://example.com/chart.png"}},
	}, false).WithState(Command{Key: "seen", Scope: ScopeThread, Merge: MergeCommutative,
		Action: Action{Kind: ActionSet, Value: json.RawMessage(`{"b":1,"a":[true,null]}`)}})
	if err := out.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back ToolOutput
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(out) {
		t.Fatalf("round trip changed the output:\n got %s", data)
	}
	if back.Text() != "a chart" {
		t.Fatalf("Text() after round trip = %q", back.Text())
	}
	if back.Content[1].Source == nil || back.Content[1].Source.Data != tinyPNG {
		t.Fatal("image bytes lost in round trip")
	}
}

func TestOutputWireFormHasContentArray(t *testing.T) {
	data, err := json.Marshal(ToolOutput{CallID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"call_id":"c1","content":[],"is_error":false}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestNormalize(t *testing.T) {
	state := Command{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove}}
	tests := []struct {
		name string
		in   ToolOutput
		want ToolOutput
	}{
		{"nil content success", ToolOutput{CallID: "c"}, TextOutput("c", EmptySuccessText)},
		{"nil content failure", ToolOutput{CallID: "c", IsError: true}, ErrorOutput("c", EmptyFailureText)},
		{"empty text success", TextOutput("c", ""), TextOutput("c", EmptySuccessText)},
		{"blank texts failure", BlocksOutput("c", []ContentBlock{{Type: BlockText, Text: " \n"}, {Type: BlockText}}, true), ErrorOutput("c", EmptyFailureText)},
		{"state survives", TextOutput("c", "").WithState(state), TextOutput("c", EmptySuccessText).WithState(state)},
		{"text kept", TextOutput("c", "hi"), TextOutput("c", "hi")},
		{"image only is not empty", BlocksOutput("c", []ContentBlock{imageBlock()}, false), BlocksOutput("c", []ContentBlock{imageBlock()}, false)},
		{"empty text beside image is kept", BlocksOutput("c", []ContentBlock{{Type: BlockText}, imageBlock()}, false), BlocksOutput("c", []ContentBlock{{Type: BlockText}, imageBlock()}, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Normalize()
			if !got.Equal(tt.want) {
				t.Fatalf("Normalize() = %+v, want %+v", got, tt.want)
			}
			if got.Content == nil {
				t.Fatal("Normalize left nil content")
			}
			if again := got.Normalize(); !again.Equal(got) {
				t.Fatal("Normalize is not idempotent")
			}
		})
	}
}

func TestEqual(t *testing.T) {
	withInput := func(raw string) ToolOutput {
		return BlocksOutput("c", []ContentBlock{{Type: BlockToolUse, ID: "u", Name: "n", Input: json.RawMessage(raw)}}, false)
	}
	withValue := func(raw string) ToolOutput {
		return TextOutput("c", "x").WithState(Command{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint,
			Action: Action{Kind: ActionSet, Value: json.RawMessage(raw)}})
	}
	tests := []struct {
		name string
		a, b ToolOutput
		want bool
	}{
		{"identical", TextOutput("c", "x"), TextOutput("c", "x"), true},
		{"call id differs", TextOutput("c", "x"), TextOutput("d", "x"), false},
		{"error flag differs", TextOutput("c", "x"), ErrorOutput("c", "x"), false},
		{"text differs", TextOutput("c", "x"), TextOutput("c", "y"), false},
		{"nil and empty content", ToolOutput{CallID: "c"}, ToolOutput{CallID: "c", Content: []ContentBlock{}}, true},
		{"input key order ignored", withInput(`{"a":1,"b":2}`), withInput(`{ "b": 2, "a": 1 }`), true},
		{"input value differs", withInput(`{"a":1}`), withInput(`{"a":2}`), false},
		// The comparison of idempotent completion: an absent value is not a null one, and a
		// number is its value, however spelled.
		{"absent input is not null", withInput(``), withInput(`null`), false},
		{"absent input equals absent", withInput(``), withInput(``), true},
		{"number spelling ignored", withInput(`{"a":1}`), withInput(`{"a":1.0}`), true},
		{"state number spelling ignored", withValue(`100`), withValue(`1e2`), true},
		{"state value canonical", withValue(`[1, {"y":2,"x":1}]`), withValue(`[1,{"x":1,"y":2}]`), true},
		{"state value differs", withValue(`1`), withValue(`2`), false},
		{"state length differs", withValue(`1`), TextOutput("c", "x"), false},
		{"image source differs", BlocksOutput("c", []ContentBlock{imageBlock()}, false),
			BlocksOutput("c", []ContentBlock{{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "https://x/y.png"}}}, false), false},
		{"nested content differs", BlocksOutput("c", []ContentBlock{{Type: BlockToolResult, ToolUseID: "u", Content: []ContentBlock{{Type: BlockText, Text: "a"}}}}, false),
			BlocksOutput("c", []ContentBlock{{Type: BlockToolResult, ToolUseID: "u", Content: []ContentBlock{{Type: BlockText, Text: "b"}}}}, false), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Fatalf("a.Equal(b) = %v, want %v", got, tt.want)
			}
			if got := tt.b.Equal(tt.a); got != tt.want {
				t.Fatalf("b.Equal(a) = %v, want %v (not symmetric)", got, tt.want)
			}
		})
	}
}

func TestContentBlockValidate(t *testing.T) {
	tests := []struct {
		name  string
		block ContentBlock
		ok    bool
	}{
		{"text", ContentBlock{Type: BlockText, Text: "x"}, true},
		{"empty text", ContentBlock{Type: BlockText}, true},
		{"text with source", ContentBlock{Type: BlockText, Text: "x", Source: &ImageSource{Type: "url", URL: "https://a/b"}}, false},
		{"base64 image", imageBlock(), true},
		{"url image", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "https://a.example/b.png"}}, true},
		{"image without source", ContentBlock{Type: BlockImage}, false},
		{"image with text", ContentBlock{Type: BlockImage, Text: "x", Source: imageBlock().Source}, false},
		{"base64 image bad data", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: "image/png", Data: "not base64!"}}, false},
		{"base64 image empty data", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: "image/png"}}, false},
		{"base64 image not an image type", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: "text/html", Data: tinyPNG}}, false},
		{"url image relative", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "/b.png"}}, false},
		{"url image ftp scheme", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "ftp://files.example/b.png"}}, false},
		{"url image file scheme", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "file:///etc/passwd"}}, false},
		{"unknown source type", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: "file", Data: "x"}}, false},
		{"tool use", ContentBlock{Type: BlockToolUse, ID: "u", Name: "echo", Input: json.RawMessage(`{}`)}, true},
		{"tool use without name", ContentBlock{Type: BlockToolUse, ID: "u"}, false},
		{"tool use bad input", ContentBlock{Type: BlockToolUse, ID: "u", Name: "n", Input: json.RawMessage(`{`)}, false},
		{"tool result", ContentBlock{Type: BlockToolResult, ToolUseID: "u", Content: []ContentBlock{{Type: BlockText, Text: "x"}}}, true},
		{"tool result without id", ContentBlock{Type: BlockToolResult}, false},
		{"tool result bad nested", ContentBlock{Type: BlockToolResult, ToolUseID: "u", Content: []ContentBlock{{Type: "weird"}}}, false},
		{"resource link", ResourceLink("tool-batch:r:1:c.0123456789abcdef", MimeTypeText, 300000), true},
		{"resource link without uri", ContentBlock{Type: BlockResourceLink, Name: "n"}, false},
		{"resource link with text", ContentBlock{Type: BlockResourceLink, URI: "awaken://objects/n", Name: "n", Text: "x"}, false},
		{"resource link negative size", ContentBlock{Type: BlockResourceLink, URI: "awaken://objects/n", Name: "n", Size: -1}, false},
		{"text with a uri", ContentBlock{Type: BlockText, Text: "x", URI: "awaken://objects/n"}, false},
		{"unknown type", ContentBlock{Type: "thinking"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, "Validate()", tt.block.Validate(), tt.ok, ErrInvalidContent)
		})
	}
}

func TestValidateStagedCommands(t *testing.T) {
	set := func(scope Scope, key string, merge MergePolicy, value string) Command {
		return Command{Key: key, Scope: scope, Merge: merge, Action: Action{Kind: ActionSet, Value: json.RawMessage(value)}}
	}
	remove := func(scope Scope, key string, merge MergePolicy) Command {
		return Command{Key: key, Scope: scope, Merge: merge, Action: Action{Kind: ActionRemove}}
	}
	tests := []struct {
		name string
		cmds []Command
		want error
	}{
		{"none", nil, nil},
		{"two disjoint sets", []Command{set(ScopeRun, "k", MergeDisjoint, `1`), set(ScopeRun, "k", MergeDisjoint, `2`)}, nil},
		{"two commutative sets", []Command{set(ScopeRun, "k", MergeCommutative, `{"a":1}`), set(ScopeRun, "k", MergeCommutative, `{"b":1}`)}, nil},
		{"one exclusive set", []Command{set(ScopeRun, "k", MergeExclusive, `1`)}, nil},
		{"exclusive set and remove", []Command{set(ScopeRun, "k", MergeExclusive, `1`), remove(ScopeRun, "k", MergeExclusive)}, nil},
		{"exclusive sets of different keys", []Command{set(ScopeRun, "a", MergeExclusive, `1`), set(ScopeRun, "b", MergeExclusive, `1`)}, nil},
		{"exclusive sets of different scopes", []Command{set(ScopeRun, "k", MergeExclusive, `1`), set(ScopeThread, "k", MergeExclusive, `1`)}, nil},
		{"two exclusive sets conflict", []Command{set(ScopeRun, "k", MergeExclusive, `1`), set(ScopeRun, "k", MergeExclusive, `1`)}, ErrStateConflict},
		{"mixed merge policies conflict", []Command{set(ScopeShared, "k", MergeDisjoint, `1`), set(ScopeShared, "k", MergeExclusive, `1`)}, ErrStateConflict},
		{"disjoint then commutative conflict", []Command{set(ScopeRun, "k", MergeDisjoint, `1`), set(ScopeRun, "k", MergeCommutative, `{"a":1}`)}, ErrStateConflict},
		{"exclusive then disjoint set conflict", []Command{set(ScopeRun, "k", MergeExclusive, `1`), set(ScopeRun, "k", MergeDisjoint, `2`)}, ErrStateConflict},
		{"empty key", []Command{set(ScopeRun, "", MergeDisjoint, `1`)}, ErrInvalidCommand},
		{"unknown scope", []Command{set("global", "k", MergeDisjoint, `1`)}, ErrInvalidCommand},
		{"unknown merge", []Command{set(ScopeRun, "k", "last", `1`)}, ErrInvalidCommand},
		{"unknown action", []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: "append"}}}, ErrInvalidCommand},
		{"set without value", []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet}}}, ErrInvalidCommand},
		{"set with invalid json", []Command{set(ScopeRun, "k", MergeDisjoint, `{`)}, ErrInvalidCommand},
		{"remove with value", []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove, Value: json.RawMessage(`1`)}}}, ErrInvalidCommand},
		{"bad run id", []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, RunID: "a b", Action: Action{Kind: ActionRemove}}}, ErrInvalidCommand},
		{"set null is a value", []Command{set(ScopeRun, "k", MergeDisjoint, `null`)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateStagedCommands(tt.cmds)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

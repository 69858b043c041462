package contracts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalJSONEquality(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{` {"a" : [1, 2]} `, `{"a":[1,2]}`, true},
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`100`, `1e2`, true},
		{`0.25`, `25e-2`, true},
		{`-0`, `0`, true},
		{`0.0`, `0e10`, true},
		{`9007199254740993`, `9007199254740992`, false},
		{`1`, `-1`, false},
		{`1`, `10`, false},
		{`0.1`, `1`, false},
		{`1e2`, `1e3`, false},
		{`1e400`, `1e400`, true},
		{`1e400`, `10e399`, true},
		{`1e9223372036854775807`, `10e9223372036854775807`, false},
		{`"a\u0062"`, `"ab"`, true},
		{`""`, `null`, false},
		{``, `null`, true},
		{`{}`, `null`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`{"a":true}`, `{"a":"true"}`, false},
		{`{not json`, `{not json`, true},
		{`{not json`, `{not  json`, false},
	} {
		if got := batchJSONEqual(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("batchJSONEqual(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := batchJSONEqual(json.RawMessage(tc.b), json.RawMessage(tc.a)); got != tc.want {
			t.Errorf("batchJSONEqual(%s, %s) = %v, want %v (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestOutputEqualityCoversEveryField(t *testing.T) {
	// The equality helper compares fields by name; this guard fails when a field is added to
	// one of the compared types so that the helper is updated with it.
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[ToolOutput]():   5,
		reflect.TypeFor[ContentBlock](): 14,
		reflect.TypeFor[ImageSource]():  4,
		reflect.TypeFor[Command]():      5,
		reflect.TypeFor[Action]():       2,
	} {
		if typ.NumField() != n {
			t.Fatalf("%s has %d fields, batchOutputEqual and batchClone* know %d: update them", typ, typ.NumField(), n)
		}
	}
	base := ToolOutput{
		CallID: "c",
		Content: []ContentBlock{
			{Type: BlockText, Text: "t"},
			{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "u"}},
			{Type: BlockToolUse, ID: "i", Name: "n", Input: json.RawMessage(`{"a":1}`)},
			{Type: BlockToolResult, ToolUseID: "i", Content: []ContentBlock{{Type: BlockText, Text: "nested"}}},
			ResourceLink("o", MimeTypeText, 5),
		},
		State: []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, RunID: "r", Action: Action{Kind: ActionSet, Value: json.RawMessage(`[1]`)}}},
	}
	if !batchOutputEqual(base, batchCloneOutput(base)) {
		t.Fatal("a clone is not equal")
	}
	respelled := batchCloneOutput(base)
	respelled.Content[2].Input = json.RawMessage(` { "a" : 1.0 } `)
	respelled.State[0].Action.Value = json.RawMessage(`[ 1 ]`)
	if !batchOutputEqual(base, respelled) {
		t.Fatal("canonically equal JSON is not equal")
	}
	empty := ToolOutput{CallID: "c", Content: []ContentBlock{}, State: []Command{}}
	if !batchOutputEqual(empty, ToolOutput{CallID: "c"}) {
		t.Fatal("nil and empty slices differ")
	}
	mutations := map[string]func(*ToolOutput){
		"call id":       func(o *ToolOutput) { o.CallID = "d" },
		"is error":      func(o *ToolOutput) { o.IsError = true },
		"text":          func(o *ToolOutput) { o.Content[0].Text = "u" },
		"type":          func(o *ToolOutput) { o.Content[0].Type = BlockToolUse },
		"source":        func(o *ToolOutput) { o.Content[1].Source.URL = "v" },
		"source nil":    func(o *ToolOutput) { o.Content[1].Source = nil },
		"input":         func(o *ToolOutput) { o.Content[2].Input = json.RawMessage(`{"a":2}`) },
		"input absent":  func(o *ToolOutput) { o.Content[2].Input = nil },
		"id":            func(o *ToolOutput) { o.Content[2].ID = "j" },
		"name":          func(o *ToolOutput) { o.Content[2].Name = "m" },
		"tool use id":   func(o *ToolOutput) { o.Content[3].ToolUseID = "j" },
		"nested":        func(o *ToolOutput) { o.Content[3].Content[0].Text = "x" },
		"block count":   func(o *ToolOutput) { o.Content = o.Content[:3] },
		"link uri":      func(o *ToolOutput) { o.Content[4].URI = "awaken://objects/p" },
		"link type":     func(o *ToolOutput) { o.Content[4].MimeType = MimeTypeContent },
		"link size":     func(o *ToolOutput) { o.Content[4].Size = 6 },
		"state key":     func(o *ToolOutput) { o.State[0].Key = "l" },
		"state scope":   func(o *ToolOutput) { o.State[0].Scope = ScopeThread },
		"state merge":   func(o *ToolOutput) { o.State[0].Merge = MergeExclusive },
		"state run":     func(o *ToolOutput) { o.State[0].RunID = "s" },
		"state action":  func(o *ToolOutput) { o.State[0].Action.Kind = ActionRemove },
		"state value":   func(o *ToolOutput) { o.State[0].Action.Value = json.RawMessage(`[2]`) },
		"state missing": func(o *ToolOutput) { o.State = nil },
	}
	for name, mutate := range mutations {
		m := batchCloneOutput(base)
		mutate(&m)
		if batchOutputEqual(base, m) {
			t.Errorf("%s: a different output compares equal", name)
		}
		if !batchOutputEqual(base, batchCloneOutput(base)) || strings.Contains(base.Content[0].Text, "u") {
			t.Fatalf("%s: mutating a clone changed the original", name)
		}
	}
}

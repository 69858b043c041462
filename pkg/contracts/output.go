package contracts

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Placeholder texts that replace an empty text-only output before it is persisted, so the
// model never receives a result with nothing in it (as the original's spill_tool_output guarantees).
const (
	EmptySuccessText = "Tool completed successfully without output."
	EmptyFailureText = "Tool failed without an error message."
)

var (
	// ErrStateConflict is returned by [ValidateStagedCommands] when two commands of one
	// commit cannot both apply (two exclusive sets of one key). The run that staged them
	// must end with a state conflict rather than silently pick a winner.
	ErrStateConflict = errors.New("state conflict")
	// ErrInvalidCommand is wrapped by every structural failure of a state [Command].
	ErrInvalidCommand = errors.New("invalid state command")
	// ErrInvalidContent is wrapped by every structural failure of a [ContentBlock] or a
	// [ToolOutput].
	ErrInvalidContent = errors.New("invalid content")
)

// TextOutput returns a successful output carrying one text block. It is the usual way for
// a tool to answer.
func TextOutput(callID, text string) ToolOutput {
	return ToolOutput{CallID: callID, Content: []ContentBlock{{Type: BlockText, Text: text}}}
}

// ErrorOutput returns a model-visible failure carrying one text block. The run continues:
// an error output is a result like any other, not an abort.
func ErrorOutput(callID, text string) ToolOutput {
	return ToolOutput{CallID: callID, Content: []ContentBlock{{Type: BlockText, Text: text}}, IsError: true}
}

// BlocksOutput returns an output with arbitrary content blocks (text, images, nested tool
// results). The slice is copied, so later changes by the caller do not leak into the
// output; a nil slice becomes an empty one.
func BlocksOutput(callID string, blocks []ContentBlock, isError bool) ToolOutput {
	content := make([]ContentBlock, len(blocks))
	copy(content, blocks)
	return ToolOutput{CallID: callID, Content: content, IsError: isError}
}

// WithState returns a copy of o with cmds appended to its staged state commands. The
// commands are applied at the batch's commit boundary, never written directly, so a tool
// can stage state and still be retried or discarded safely. o itself is not modified.
func (o ToolOutput) WithState(cmds ...Command) ToolOutput {
	state := make([]Command, 0, len(o.State)+len(cmds))
	state = append(state, o.State...)
	o.State = append(state, cmds...)
	return o
}

// Text returns the derived plain-text view of o: the text of every text block and of the
// text blocks nested in tool_result blocks, in order, joined by "\n". Images and tool_use
// blocks are excluded. The content blocks, not this view, are what is stored and published.
func (o ToolOutput) Text() string {
	var parts []string
	collectBlockText(o.Content, &parts)
	return strings.Join(parts, "\n")
}

func collectBlockText(blocks []ContentBlock, parts *[]string) {
	for _, b := range blocks {
		switch b.Type {
		case BlockText:
			*parts = append(*parts, b.Text)
		case BlockToolResult:
			collectBlockText(b.Content, parts)
		}
	}
}

// IsEmptyText reports whether o is text-only (every block is a text block, or there are no
// blocks) and its text is blank. Such an output is replaced by a placeholder in
// [ToolOutput.Normalize].
func (o ToolOutput) IsEmptyText() bool {
	for _, b := range o.Content {
		if b.Type != BlockText || strings.TrimSpace(b.Text) != "" {
			return false
		}
	}
	return true
}

// Normalize returns o as it is persisted: an empty text-only output is replaced by one
// text block saying so ([EmptySuccessText] or [EmptyFailureText]), and a nil Content
// becomes an empty slice so the wire form is always an array. Call id, error flag and
// staged state are kept. Normalize is idempotent.
func (o ToolOutput) Normalize() ToolOutput {
	if o.IsEmptyText() {
		text := EmptySuccessText
		if o.IsError {
			text = EmptyFailureText
		}
		o.Content = []ContentBlock{{Type: BlockText, Text: text}}
		return o
	}
	if o.Content == nil {
		o.Content = []ContentBlock{}
	}
	return o
}

// MarshalJSON writes o with "content" always an array (never null), as the wire form
// requires: a consumer may iterate it without a null check.
func (o ToolOutput) MarshalJSON() ([]byte, error) {
	type plain ToolOutput
	p := plain(o)
	if p.Content == nil {
		p.Content = []ContentBlock{}
	}
	return json.Marshal(p)
}

// Equal reports whether o and p are the same output — the comparison idempotent
// completion makes ([CallRecord.Complete] accepts a second output only when it is Equal to
// the recorded one). Raw JSON fields (tool_use input, state values, structured content)
// compare as JSON values: key order, whitespace and number spelling do not matter (1, 1.0
// and 1e0 are equal, with no float rounding), and an absent one equals only an absent one;
// a nil slice equals an empty one.
func (o ToolOutput) Equal(p ToolOutput) bool { return batchOutputEqual(o, p) }

// Equal reports whether b and c are the same block, as [ToolOutput.Equal] compares blocks:
// raw input as a JSON value, nested content recursively.
func (b ContentBlock) Equal(c ContentBlock) bool {
	return batchBlocksEqual([]ContentBlock{b}, []ContentBlock{c})
}

// Equal reports whether c and d are the same command, as [ToolOutput.Equal] compares
// state: the set value as a JSON value.
func (c Command) Equal(d Command) bool { return batchCommandsEqual([]Command{c}, []Command{d}) }

// wireCanonicalJSON returns the canonical form of a JSON document: compact, object keys
// sorted, strings re-escaped uniformly, number literals kept as written. Two documents
// with the same canonical form denote the same value.
func wireCanonicalJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("canonical json: trailing data after the value")
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return out, nil
}

// Validate checks o structurally: a valid call id, valid content blocks and valid staged
// commands. It does not check conflicts between commands; that is a property of a whole
// commit (see [ValidateStagedCommands]).
func (o ToolOutput) Validate() error {
	if err := ValidateCallID("call_id", o.CallID); err != nil {
		return err
	}
	if len(o.StructuredContent) != 0 && !json.Valid(o.StructuredContent) {
		return fmt.Errorf("%w: structured_content is not valid JSON", ErrInvalidContent)
	}
	for i, b := range o.Content {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("content[%d]: %w", i, err)
		}
	}
	for i, c := range o.State {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("state[%d]: %w", i, err)
		}
	}
	return nil
}

// Validate checks that b is a well-formed block of a known type and carries only the
// fields of its type: text has only text; image has a base64 source (image media type,
// valid standard base64 data) or an absolute http(s) URL; tool_use has an id, a name and,
// if present, valid JSON input; tool_result names the tool use it answers and its nested
// blocks are valid. Unknown types are rejected: nothing downstream could render them.
func (b ContentBlock) Validate() error {
	type field struct {
		name string
		set  bool
	}
	foreign := func(allowed ...string) error {
		for _, f := range []field{
			{"text", b.Text != ""}, {"source", b.Source != nil}, {"id", b.ID != ""},
			{"name", b.Name != ""}, {"input", len(b.Input) != 0}, {"tool_use_id", b.ToolUseID != ""},
			{"content", len(b.Content) != 0}, {"uri", b.URI != ""}, {"mimeType", b.MimeType != ""},
			{"size", b.Size != 0}, {"title", b.Title != ""}, {"description", b.Description != ""},
			{"resource", b.Resource != nil},
		} {
			if f.set && !slices.Contains(allowed, f.name) {
				return fmt.Errorf("%w: a %s block cannot carry %q", ErrInvalidContent, b.Type, f.name)
			}
		}
		return nil
	}
	switch b.Type {
	case BlockText:
		return foreign("text")
	case BlockImage:
		if err := foreign("source"); err != nil {
			return err
		}
		return b.Source.validate()
	case BlockToolUse:
		if err := foreign("id", "name", "input"); err != nil {
			return err
		}
		if b.ID == "" || b.Name == "" {
			return fmt.Errorf("%w: a tool_use block needs an id and a name", ErrInvalidContent)
		}
		if len(b.Input) != 0 && !json.Valid(b.Input) {
			return fmt.Errorf("%w: tool_use input is not valid JSON", ErrInvalidContent)
		}
		return nil
	case BlockToolResult:
		if err := foreign("tool_use_id", "content"); err != nil {
			return err
		}
		if b.ToolUseID == "" {
			return fmt.Errorf("%w: a tool_result block needs a tool_use_id", ErrInvalidContent)
		}
		for i, nested := range b.Content {
			if err := nested.Validate(); err != nil {
				return fmt.Errorf("content[%d]: %w", i, err)
			}
		}
		return nil
	case BlockAudio:
		if err := foreign("source"); err != nil {
			return err
		}
		return b.Source.validateAudio()
	case BlockResource:
		if err := foreign("resource"); err != nil {
			return err
		}
		return b.Resource.validate()
	case BlockResourceLink:
		if err := foreign("uri", "name", "mimeType", "size", "title", "description"); err != nil {
			return err
		}
		if b.URI == "" || b.Name == "" {
			return fmt.Errorf("%w: a resource_link block needs a uri and a name", ErrInvalidContent)
		}
		if b.Size < 0 {
			return fmt.Errorf("%w: a resource_link size cannot be negative", ErrInvalidContent)
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown block type %q", ErrInvalidContent, b.Type)
	}
}

// validateAudio checks the source of an audio block: base64 data of an audio media type.
func (s *ImageSource) validateAudio() error {
	if s == nil || s.Type != "base64" || s.URL != "" {
		return fmt.Errorf("%w: an audio block needs a base64 source", ErrInvalidContent)
	}
	if !strings.HasPrefix(s.MediaType, "audio/") || len(s.MediaType) == len("audio/") {
		return fmt.Errorf("%w: audio media_type %q is not an audio type", ErrInvalidContent, s.MediaType)
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(s.Data); err != nil || s.Data == "" {
		return fmt.Errorf("%w: audio data is not non-empty standard base64", ErrInvalidContent)
	}
	return nil
}

// validate checks an embedded resource: a uri and exactly one of text or base64 blob.
func (r *EmbeddedResource) validate() error {
	if r == nil || r.URI == "" {
		return fmt.Errorf("%w: a resource block needs a resource with a uri", ErrInvalidContent)
	}
	if r.Text != "" && r.Blob != "" {
		return fmt.Errorf("%w: a resource holds text or a blob, not both", ErrInvalidContent)
	}
	if r.Blob != "" {
		if _, err := base64.StdEncoding.Strict().DecodeString(r.Blob); err != nil {
			return fmt.Errorf("%w: resource blob: %v", ErrInvalidContent, err)
		}
	}
	return nil
}

func (s *ImageSource) validate() error {
	if s == nil {
		return fmt.Errorf("%w: an image block needs a source", ErrInvalidContent)
	}
	switch s.Type {
	case "base64":
		if s.URL != "" {
			return fmt.Errorf("%w: a base64 image source cannot carry a url", ErrInvalidContent)
		}
		if !strings.HasPrefix(s.MediaType, "image/") || len(s.MediaType) == len("image/") {
			return fmt.Errorf("%w: base64 image media_type %q is not an image type", ErrInvalidContent, s.MediaType)
		}
		if s.Data == "" {
			return fmt.Errorf("%w: base64 image data is empty", ErrInvalidContent)
		}
		if _, err := base64.StdEncoding.Strict().DecodeString(s.Data); err != nil {
			return fmt.Errorf("%w: base64 image data: %v", ErrInvalidContent, err)
		}
		return nil
	case "url":
		if s.MediaType != "" || s.Data != "" {
			return fmt.Errorf("%w: a url image source carries only a url", ErrInvalidContent)
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%w: image url %q is not an absolute http(s) url", ErrInvalidContent, s.URL)
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown image source type %q", ErrInvalidContent, s.Type)
	}
}

// Valid reports whether s is one of the four scopes.
func (s Scope) Valid() bool {
	switch s {
	case ScopeRun, ScopeThread, ScopeShared, ScopeProfile:
		return true
	}
	return false
}

// Valid reports whether m is one of the three merge policies.
func (m MergePolicy) Valid() bool {
	switch m {
	case MergeDisjoint, MergeCommutative, MergeExclusive:
		return true
	}
	return false
}

// Validate checks one command on its own: a non-empty key, a known scope and merge
// policy, a valid run id when one is stamped, and an action that is either a set with a
// valid JSON value or a remove without one. Failures wrap [ErrInvalidCommand].
func (c Command) Validate() error {
	if c.Key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidCommand)
	}
	if !c.Scope.Valid() {
		return fmt.Errorf("%w: key %q has unknown scope %q", ErrInvalidCommand, c.Key, c.Scope)
	}
	if !c.Merge.Valid() {
		return fmt.Errorf("%w: key %q has unknown merge policy %q", ErrInvalidCommand, c.Key, c.Merge)
	}
	if c.RunID != "" {
		if err := ValidateID("run_id", c.RunID); err != nil {
			return fmt.Errorf("%w: key %q: %w", ErrInvalidCommand, c.Key, err)
		}
	}
	switch c.Action.Kind {
	case ActionSet:
		if len(bytes.TrimSpace(c.Action.Value)) == 0 {
			return fmt.Errorf("%w: set of key %q has no value", ErrInvalidCommand, c.Key)
		}
		if !json.Valid(c.Action.Value) {
			return fmt.Errorf("%w: set of key %q has a value that is not valid JSON", ErrInvalidCommand, c.Key)
		}
	case ActionRemove:
		if len(bytes.TrimSpace(c.Action.Value)) != 0 {
			return fmt.Errorf("%w: remove of key %q carries a value", ErrInvalidCommand, c.Key)
		}
	default:
		return fmt.Errorf("%w: key %q has unknown action %q", ErrInvalidCommand, c.Key, c.Action.Kind)
	}
	return nil
}

// ValidateStagedCommands is the commit-time check of every state command staged by one
// batch, in model order. Each command must be valid on its own ([ErrInvalidCommand]).
// Across commands, two sets of one (scope, key) where that key is exclusive conflict, and
// so does one (scope, key) staged under two different merge policies, because the merge
// policy is a property of the key and disagreement means the tools disagree about it.
// Both wrap [ErrStateConflict]: the run must fail rather than let one write win silently.
// The function is pure and safe for concurrent use.
func ValidateStagedCommands(cmds []Command) error {
	type slot struct {
		scope Scope
		key   string
	}
	type seen struct {
		merge MergePolicy
		sets  int
		first int
	}
	slots := make(map[slot]*seen, len(cmds))
	for i, c := range cmds {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("state command %d: %w", i, err)
		}
		k := slot{c.Scope, c.Key}
		s, ok := slots[k]
		if !ok {
			s = &seen{merge: c.Merge, first: i}
			slots[k] = s
		} else if s.merge != c.Merge {
			return fmt.Errorf("%w: key %q in scope %s is staged as %s by command %d and as %s by command %d",
				ErrStateConflict, c.Key, c.Scope, s.merge, s.first, c.Merge, i)
		}
		if c.Action.Kind == ActionSet {
			s.sets++
			if c.Merge == MergeExclusive && s.sets > 1 {
				return fmt.Errorf("%w: exclusive key %q in scope %s is set twice in one commit (command %d)",
					ErrStateConflict, c.Key, c.Scope, i)
			}
		}
	}
	return nil
}

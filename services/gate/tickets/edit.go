package tickets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// This file handles an approval that edits the call's arguments: the edit is checked
// against the tool's parameters schema (a refusal leaves the ticket open) and gated again
// by the host and run policies (a block denies the call).

// resolver is what resume command resumeID records on call i when it resolves the call's
// ticket: who decided (claimed: as the command's own claim) and, for an approval with edited arguments, the edit and whether
// the policies block it. An edit that does not fit the tool is a
// [contracts.ErrInvalidEditedArguments] refusal; any other error is transient.
func (h *Handler) resolver(ctx context.Context, b *contracts.BatchRecord, i int, cmd contracts.ResumeCommand, resumeID string, claimed bool) (contracts.Resolver, error) {
	r := contracts.Resolver{By: resumeID, Actor: cmd.Actor, Claimed: claimed}
	call := b.Submission.Calls[i]
	edited := cmd.Result.Permission.EditedArguments(call.Arguments)
	if edited == nil {
		return r, nil
	}
	edited, err := contracts.ArgumentsObject(edited)
	if err != nil {
		return r, err
	}
	if err := h.validateArguments(ctx, call.ToolID, edited); err != nil {
		return r, err
	}
	r.EditedArguments = edited
	call.Arguments = edited
	if o := h.dispatch.PolicyChain(b, call); o.Kind == contracts.GateBlock {
		r.EditBlocked = o.Reason
	}
	return r, nil
}

// validateArguments checks args against the parameters schema of tool id from the place
// it is defined, as the catalog does: the descriptor brain-exec published for a tool it
// runs (a typed tool's Go argument type, an MCP server's inputSchema), else the
// configuration's parameters. A tool neither describes accepts any object; its executor
// still validates what it runs.
func (h *Handler) validateArguments(ctx context.Context, id string, args json.RawMessage) error {
	t, ok := h.env.Config.Tool(id)
	if !ok {
		return nil
	}
	err := t.ValidateArguments(args)
	if err == nil && t.Target == contracts.TargetBrain && t.Kind != contracts.KindClientExecuted && t.SetResult == nil {
		err = h.validatePublished(ctx, t, args)
	}
	var te *contracts.ToolError
	if errors.As(err, &te) {
		return &contracts.ResumeError{Code: contracts.ResumeInvalidArguments, Message: te.Error()}
	}
	return err
}

// validatePublished validates args against the schema brain-exec published for t. It
// fails closed: with no tools bucket, no descriptors, descriptors that do not decode
// strictly, no descriptor of t or one whose schema does not compile, the edit of a tool
// the configuration gives no parameters schema of its own is refused
// ([contracts.ResumeInvalidArguments], the ticket stays open) rather than passed
// unchecked — the descriptors are the only schema of an MCP or typed tool, and a wiped
// or forged record must not turn the check off.
func (h *Handler) validatePublished(ctx context.Context, t config.Tool, args json.RawMessage) error {
	key := t.Builtin
	if key == "" {
		key = t.ID
	}
	unchecked := func(why string) error {
		if t.Parameters != nil {
			// The configuration's own schema already checked the edit.
			return nil
		}
		return &contracts.ResumeError{Code: contracts.ResumeInvalidArguments,
			Message: fmt.Sprintf("edited arguments of tool %s cannot be checked: %s; approve without editing, or retry once brain-exec has published its tools", t.ID, why)}
	}
	kv, err := h.env.ToolsBucket(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return unchecked("no tools bucket")
	}
	if err != nil {
		return fmt.Errorf("gate: tools bucket: %w", err)
	}
	e, err := kv.Get(ctx, contracts.ToolDescriptorsKey(contracts.TargetBrain))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return unchecked("brain-exec has published no descriptors")
	}
	if err != nil {
		return fmt.Errorf("gate: tool descriptors: %w", err)
	}
	descs, err := bus.Decode[[]contracts.ToolDescriptor](e.Value())
	if err != nil {
		h.log.Error().Err(err).Msg("published tool descriptors refused: they do not decode strictly")
		return unchecked("the published descriptors are unreadable")
	}
	for _, d := range descs {
		if d.ID != key {
			continue
		}
		if len(d.Parameters) == 0 {
			return unchecked("its descriptor has no parameters schema")
		}
		schema, err := jsonschema.Compile(d.Parameters)
		if err != nil {
			return unchecked("its published schema does not compile")
		}
		return config.ValidateAgainst(schema, args)
	}
	return unchecked("brain-exec published no descriptor of it")
}

package publisher

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// headerAllowance is reserved for the NATS header block framing beyond the headers we
// count, when a message's size is checked against the connection's max payload.
const headerAllowance = 512

// publication is everything a finalized batch owes: its results (see [publication.single]
// and [publication.results]), and the live tool_result facts sent once they are stored.
type publication struct {
	// single is the batch's io.awaken.toolbatch.results.v1 message — every result in model
	// order and the finalized payload — or nil when that message would exceed the server's
	// max payload: the batch is then published as the atomic batch of results.
	single *bus.Outgoing
	// results are every io.awaken.tool.result.v1 in model order, then the finalized event:
	// the atomic batch of a batch too large for single.
	results []bus.Outgoing
	// facts are the tool_result facts, one per call in model order, on the run's facts
	// subject: a projection of the results (results[i].output.is_error), sent, not stored.
	facts []bus.Outgoing
	// outcomes are the published outcome of each call, in model order, for the metrics.
	outcomes []callOutcome
	// ended is set when the batch ends its run (a state conflict).
	ended *contracts.RunEnded
}

// callOutcome is one published call's outcome and whether its output is an error.
type callOutcome struct {
	outcome contracts.Outcome
	isError bool
}

// build makes the publication of rec from its terminal call records, in model order, and
// the operators' resolutions recorded on rec. It is a pure function of the records
// (terminal records change only by a resolution, which the batch record carries first), so
// every delivery that builds it from the finalized batch produces the same messages under
// the same ids.
//
// Two limits are enforced here rather than discovered as a failed publish: a result whose
// message would exceed the server's max payload carries an error output saying so instead
// of the oversized output, and staged state that conflicts (ValidateStagedCommands) or
// would make the finalized event too large is left out of it, with an error logged. Each
// result keeps its own output's state, so no staged command is lost from the stream.
func (s *Service) build(ctx context.Context, rec *contracts.BatchRecord, calls []contracts.CallRecord) (publication, error) {
	log := zerolog.Ctx(ctx)
	sub := &rec.Submission
	batchID := sub.BatchID()
	subject := s.env.Names.ResultsSubject(sub.RunID)
	limit := s.maxMessage()

	pub := publication{
		results: make([]bus.Outgoing, 0, len(calls)+1),
		facts:   make([]bus.Outgoing, 0, len(calls)),
	}
	callIDs := make([]string, len(calls))
	events := make([]contracts.ToolResultEvent, 0, len(calls))
	var staged []contracts.Command
	for i, c := range sub.Calls {
		callIDs[i] = c.CallID
		outcome, output := result(c, &calls[i])
		if r, ok := rec.Resolved(i); ok {
			// An operator resolved the indeterminate call while the batch was open: the
			// resolution recorded on the batch is its result (see handle.go's finalize).
			outcome, output = contracts.OutcomeCompleted, r.Output
			output.CallID = c.CallID
			if output.Content == nil {
				output.Content = []contracts.ContentBlock{}
			}
		}
		ev := contracts.ToolResultEvent{
			BatchID: batchID, RunID: sub.RunID, Index: i, CallID: c.CallID, ToolID: c.ToolID,
			Outcome: outcome, Output: output,
		}
		o, err := s.event(subject, pipeline.ResultID(batchID, i), contracts.TypeToolResult, ev)
		if err != nil {
			return publication{}, err
		}
		if size := messageSize(o); size > limit {
			log.Error().Str("call_id", c.CallID).Int("bytes", size).Int("limit", limit).
				Msg("tool result exceeds the largest publishable message; publishing an error result instead")
			ev.Output = contracts.ErrorOutput(c.CallID, fmt.Sprintf(
				"tool output too large to publish: its result message is %d bytes, the limit is %d", size, limit))
			output = ev.Output
			if o, err = s.event(subject, pipeline.ResultID(batchID, i), contracts.TypeToolResult, ev); err != nil {
				return publication{}, err
			}
		}
		pub.results = append(pub.results, o)
		events = append(events, ev)
		staged = append(staged, output.State...)

		isError := output.IsError
		pub.outcomes = append(pub.outcomes, callOutcome{outcome, isError})
		fact, err := s.event(s.env.Names.FactsSubject(sub.RunID),
			pipeline.AgentEventID(contracts.OperationID(sub.RunID, sub.Step, c.CallID), contracts.EventToolResult),
			contracts.TypeAgentEvent, contracts.AgentEvent{
				Tier: "fact", BatchID: batchID,
				Event: contracts.AgentFact{Type: contracts.EventToolResult, ID: c.CallID, IsError: &isError},
			})
		if err != nil {
			return publication{}, err
		}
		pub.facts = append(pub.facts, fact)
	}

	if err := contracts.ValidateStagedCommands(staged); err != nil {
		if contracts.IsStateConflict(err) {
			// Reference §1.4: the run ends with StateConflict; no write wins silently.
			pub.ended = &contracts.RunEnded{Reason: contracts.RunEndStateConflict, Keys: contracts.StateConflictKeys(staged)}
			log.Error().Err(err).Strs("keys", pub.ended.Keys).Msg("staged state of the batch conflicts; the run ends in a state conflict")
		} else {
			log.Error().Err(err).Msg("staged state of the batch is invalid; publishing the finalized event with empty state")
		}
		staged = nil
	}
	fin := contracts.BatchFinalized{
		BatchID: batchID, RunID: sub.RunID, ThreadID: sub.ThreadID, Step: sub.Step,
		CallIDs: callIDs, State: nonNil(staged), RunEnded: pub.ended,
	}
	o, err := s.event(subject, pipeline.FinalizedID(batchID), contracts.TypeBatchFinalized, fin)
	if err != nil {
		return publication{}, err
	}
	if size := messageSize(o); size > limit {
		log.Error().Int("bytes", size).Int("limit", limit).Int("commands", len(staged)).
			Msg("finalized event with the staged state exceeds the largest publishable message; publishing it with empty state")
		fin.State = []contracts.Command{}
		if o, err = s.event(subject, pipeline.FinalizedID(batchID), contracts.TypeBatchFinalized, fin); err != nil {
			return publication{}, err
		}
	}
	pub.results = append(pub.results, o)
	if pub.single, err = s.resultsMessage(ctx, subject, events, fin, pub.results); err != nil {
		return publication{}, err
	}
	return pub, nil
}

// result is the published outcome and output of terminal call c: the committed output
// of a Completed call, or for an Indeterminate call an error output naming the reason.
func result(c contracts.ToolCall, rec *contracts.CallRecord) (contracts.Outcome, contracts.ToolOutput) {
	out, ok := rec.Output()
	if !ok {
		// A terminal record without an output is not a valid record; its outcome cannot
		// be known, which is exactly what indeterminate says.
		return contracts.OutcomeIndeterminate, contracts.ErrorOutput(c.CallID, contracts.IndeterminatePrefix+"the call record holds no output")
	}
	out.CallID = c.CallID
	if out.Content == nil {
		out.Content = []contracts.ContentBlock{}
	}
	return rec.Outcome(), out
}

// event builds an outgoing event of the publisher with a deterministic id.
func (s *Service) event(subject, id, typ string, payload any) (bus.Outgoing, error) {
	ev, err := s.env.Event(ServiceName, id, typ, payload)
	if err != nil {
		return bus.Outgoing{}, fmt.Errorf("publisher: build %s: %w", typ, err)
	}
	return bus.Outgoing{Subject: subject, Event: ev}, nil
}

// maxMessage is the largest message the connected server accepts, less the framing
// allowance.
func (s *Service) maxMessage() int {
	limit := int64(1 << 20) // the NATS default, if the connection cannot say
	if mp := s.env.MaxPayload(); mp > 0 {
		limit = mp
	}
	return int(limit) - headerAllowance
}

// messageSize is the size of o on the wire: its body plus its header block.
func messageSize(o bus.Outgoing) int {
	m := cloudevent.EncodeMsg(o.Subject, o.Event)
	return len(m.Data) + headerSize(m.Header)
}

// headerSize is the size of the NATS header block h ("NATS/1.0\r\n", one "k: v\r\n" per
// value, a final "\r\n").
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}

// nonNil returns cmds, or an empty slice for nil, so the finalized event always carries
// "state": [] rather than null.
func nonNil(cmds []contracts.Command) []contracts.Command {
	if cmds == nil {
		return []contracts.Command{}
	}
	return cmds
}

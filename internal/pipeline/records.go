package pipeline

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The record is the work: a call-record revision that hands the call on is written with
// the CloudEvents attributes of that hand-off in its headers (binary mode), and the next
// service consumes the calls bucket's stream instead of a separate work message written
// beside the record. Which revisions hand work on is a function of the record's state,
// decided here once for every writer (gate, executors, batcher).

// announceCall returns the headers of the revision rec of call key: a terminal record
// (Completed or Indeterminate) is the call's output, [contracts.TypeCallOutput], the
// work of the publisher's barrier and of the batcher's sequential dispatch; every other
// revision hands nothing on and is a plain key-value write.
func (e *Env) announceCall(ctx context.Context, key string, rec *contracts.CallRecord) nats.Header {
	if !rec.Phase.IsTerminal() {
		return nil
	}
	runID, step, callID, err := contracts.ParseCallKey(key)
	if err != nil {
		// Not a key this package makes: written, but handed to no one.
		e.Log.Error().Err(err).Str("key", key).Msg("terminal call record under a key that names no call; not announced")
		return nil
	}
	ev := bus.Event{
		ID:              OutputID(contracts.OperationID(runID, step, callID)),
		Source:          e.source(),
		Type:            contracts.TypeCallOutput,
		Subject:         contracts.BatchID(runID, step),
		Time:            e.Now(),
		DataContentType: bus.ContentTypeJSON,
	}
	return e.Pub.Headers(ctx, ev)
}

// source is the ce-source of the revisions this environment's service writes.
func (e *Env) source() string {
	if e.Service == "" {
		return "awaken/pipeline"
	}
	return "awaken/" + e.Service
}

// CallOutputOf reads the output a terminal call-record revision announces (a delivery of
// a consumer of [contracts.Names.CallRecordsStream] accepting [contracts.TypeCallOutput]):
// the run and step from its key, the call, its outcome and whether it ran in parallel from
// the record. A revision that names no call, or whose record is not terminal, is a
// [*contracts.Rejection]: only a terminal record is written with this type.
func CallOutputOf(n contracts.Names, d bus.Delivery) (contracts.CallOutput, error) {
	var out contracts.CallOutput
	key, ok := strings.CutPrefix(d.Subject, contracts.RecordSubject(n.CallsBucket(), ""))
	if !ok {
		return out, contracts.Reject(contracts.RejectInvalidField, "call output on %q, not a call record's subject", d.Subject)
	}
	runID, step, callID, err := contracts.ParseCallKey(key)
	if err != nil {
		return out, contracts.Reject(contracts.RejectInvalidID, "call output: %v", err)
	}
	var rec contracts.CallRecord
	if err := json.Unmarshal(d.Event.Data, &rec); err != nil {
		return out, contracts.Reject(contracts.RejectInvalidJSON, "call output %s: record: %v", key, err)
	}
	if !rec.Phase.IsTerminal() {
		return out, contracts.Reject(contracts.RejectInvalidField, "call output %s: record is %s, not terminal", key, rec.Phase.Kind)
	}
	if rec.CallID != callID {
		return out, contracts.Reject(contracts.RejectInvalidField, "call output %s: record names call %q", key, rec.CallID)
	}
	return contracts.CallOutput{
		RunID: runID, Step: step, Index: rec.Index, CallID: rec.CallID, ToolID: rec.ToolID,
		Outcome: rec.Outcome(), Parallel: rec.Parallel,
	}, nil
}

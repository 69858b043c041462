package pipeline

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The record is the work: a call-record revision that hands the call on is written with
// the CloudEvents attributes of that hand-off in its headers (binary mode), and the next
// service consumes the calls bucket's stream instead of a separate work message written
// beside the record. Which revisions hand work on is a function of the record's state,
// decided here once for every writer (gate, executors, batcher).

// announceCall returns the headers of the revision rec of call key. Two revisions hand
// the call on:
//   - Executing, not entered, with its input — written only by the gate, when it hands
//     the call to its executor (with the decision, or after a resolution's audit) — is
//     the executor request,
//     [contracts.TypeExecRequest], ce-id {op}:exec:{attempt}: the work of the executor
//     of the key's target;
//   - a terminal record (Completed or Indeterminate) is the call's output,
//     [contracts.TypeCallOutput], ce-id {op}:output: the work of the publisher's barrier
//     and of the gate's sequential dispatch.
//
// Every other revision (a decision alone, Awaiting, a resolution not yet handed over,
// entered, a recovery's next attempt, which its own delivery runs) hands nothing on and is
// a plain key-value write.
func (e *Env) announceCall(ctx context.Context, key string, rec *contracts.CallRecord) nats.Header {
	var typ string
	switch {
	case rec.Phase.IsTerminal():
		typ = contracts.TypeCallOutput
	case rec.ExecutingUnentered() && rec.Input != nil:
		typ = contracts.TypeExecRequest
	default:
		return nil
	}
	_, runID, step, callID, err := contracts.ParseCallKey(key)
	if err != nil {
		// Not a key this package makes: written, but handed to no one.
		e.Log.Error().Err(err).Str("key", key).Msg("call record under a key that names no call; not announced")
		return nil
	}
	op := contracts.OperationID(runID, step, callID)
	id := OutputID(op)
	if typ == contracts.TypeExecRequest {
		id = ExecRequestID(op, rec.Phase.Attempt)
	}
	ev := cloudevent.Event{
		ID:              id,
		Source:          e.source(),
		Type:            typ,
		Subject:         contracts.BatchID(runID, step),
		Time:            e.Now(),
		DataContentType: cloudevent.ContentTypeJSON,
	}
	return e.Pub.Headers(ctx, ev)
}

// announceRun returns the headers of the revision rec of run key: the revision that
// claims the run for a batch and records it — the batch open, the run not ended, which
// only [Env.AcceptBatch] writes — is the gate's work for that batch,
// [contracts.TypeBatchRecorded], ce-id {batch_id}:recorded. Every other revision
// (finalized, released, ended) hands nothing on.
func (e *Env) announceRun(ctx context.Context, key string, rec *contracts.RunRecord) nats.Header {
	b := rec.Batch
	if b == nil || b.Phase != contracts.BatchPhaseOpen || rec.Ended != nil {
		return nil
	}
	batchID := b.Submission.BatchID()
	ev := cloudevent.Event{
		ID:              BatchRecordedID(batchID),
		Source:          e.source(),
		Type:            contracts.TypeBatchRecorded,
		Subject:         batchID,
		Time:            e.Now(),
		DataContentType: cloudevent.ContentTypeJSON,
	}
	return e.Pub.Headers(ctx, ev)
}

// BatchRecordedOf reads the batch a [contracts.TypeBatchRecorded] run-record revision
// records (a delivery of a consumer of [contracts.Names.RunRecordsStream]). A subject
// that is no run record's, a record that does not decode, holds no open batch or names
// another run than its key is a [*contracts.Rejection]: only such a revision is written
// with this type.
func BatchRecordedOf(n contracts.Names, d bus.Delivery) (*contracts.BatchRecord, error) {
	key, _, ok := n.RecordKeyOf(contracts.Names.RunsBucket, d.Subject)
	if !ok {
		return nil, contracts.Reject(contracts.RejectInvalidField, "%s on %q, not a run record's subject", d.Event.Type, d.Subject)
	}
	var rec contracts.RunRecord
	if err := decodeRecord(d.Event.Type, key, d.Event.Data, &rec); err != nil {
		return nil, err
	}
	if contracts.RunKey(rec.RunID) != key {
		return nil, contracts.Reject(contracts.RejectInvalidField, "%s %s: record names run %q", d.Event.Type, key, rec.RunID)
	}
	b := rec.Batch
	if b == nil || b.Phase != contracts.BatchPhaseOpen || b.Submission.RunID != rec.RunID {
		return nil, contracts.Reject(contracts.RejectInvalidField, "%s %s: the record holds no open batch of its run", d.Event.Type, key)
	}
	return b, nil
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
	out, _, err := CallOutputRecordOf(n, d)
	return out, err
}

// CallOutputRecordOf is [CallOutputOf] that also returns the terminal record the revision
// holds, for a consumer that acts on more than the outcome (how an Indeterminate call
// ended).
func CallOutputRecordOf(n contracts.Names, d bus.Delivery) (contracts.CallOutput, contracts.CallRecord, error) {
	var out contracts.CallOutput
	key, runID, step, rec, err := CallRecordOf(n, d)
	if err != nil {
		return out, rec, err
	}
	if !rec.Phase.IsTerminal() {
		return out, rec, contracts.Reject(contracts.RejectInvalidField, "call output %s: record is %s, not terminal", key, rec.Phase.Kind)
	}
	return contracts.CallOutput{
		RunID: runID, Step: step, Index: rec.Index, CallID: rec.CallID, ToolID: rec.ToolID,
		Outcome: rec.Outcome(), Parallel: rec.Parallel,
	}, rec, nil
}

// CallRecordOf reads a call-record revision delivered by a consumer of
// [contracts.Names.CallRecordsStream]: its key, the run and step the key names, and the
// record. A subject that is no call key, a record that does not decode or that names
// another call than its key is a [*contracts.Rejection].
func CallRecordOf(n contracts.Names, d bus.Delivery) (key, runID string, step int64, rec contracts.CallRecord, err error) {
	key, _, ok := n.RecordKeyOf(contracts.Names.CallsBucket, d.Subject)
	if !ok {
		return "", "", 0, rec, contracts.Reject(contracts.RejectInvalidField, "%s on %q, not a call record's subject", d.Event.Type, d.Subject)
	}
	_, runID, step, callID, err := contracts.ParseCallKey(key)
	if err != nil {
		return "", "", 0, rec, contracts.Reject(contracts.RejectInvalidID, "%s: %v", d.Event.Type, err)
	}
	if err := decodeRecord(d.Event.Type, key, d.Event.Data, &rec); err != nil {
		return "", "", 0, rec, err
	}
	if rec.CallID != callID {
		return "", "", 0, rec, contracts.Reject(contracts.RejectInvalidField, "%s %s: record names call %q", d.Event.Type, key, rec.CallID)
	}
	return key, runID, step, rec, nil
}

// decodeRecord reads the record a revision of type typ under key holds, as a
// [*contracts.Rejection]: unsupported_format for a format version this version does not
// read, invalid_json for anything else that does not decode.
func decodeRecord(typ, key string, data []byte, v any) error {
	err := contracts.DecodeRecord(data, v)
	if err == nil {
		return nil
	}
	if rej, ok := errors.AsType[*contracts.Rejection](err); ok {
		return contracts.Reject(rej.Code, "%s %s: record: %s", typ, key, rej.Message)
	}
	return contracts.Reject(contracts.RejectInvalidJSON, "%s %s: record: %v", typ, key, err)
}

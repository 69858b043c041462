package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrDecisionUnaudited: a run's call records hold a decision its audit chain has no record
// of. The chain alone cannot show a record that was never stored, or the last records of a
// chain removed whole: the call records, written by the gate beside every decision, can.
var ErrDecisionUnaudited = errors.New("a decision has no audit record")

// resolutionLabels are the audit decisions of a ticket's resolution: a person's approval
// or denial, an approval whose edit the policy blocked (deny), the timer's expiry and a
// scheduled action run at its due time.
var resolutionLabels = map[string]bool{
	contracts.AuditDecisionApproved: true, contracts.AuditDecisionDenied: true, contracts.AuditDecisionDeny: true,
	contracts.AuditDecisionExpired: true, contracts.AuditDecisionScheduled: true,
}

// runCall is one call record of a run with the batch it belongs to.
type runCall struct {
	batchID string
	rec     contracts.CallRecord
}

// readRunCalls reads every call record of run from the calls bucket.
func readRunCalls(ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) ([]runCall, error) {
	kv, err := js.KeyValue(ctx, names.CallsBucket())
	if err != nil {
		return nil, fmt.Errorf("calls bucket: %w", err)
	}
	w, err := kv.Watch(ctx, contracts.CallKeysOfRun(run), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read the call records of run %s: %w", run, err)
	}
	defer w.Stop()
	var out []runCall
	for {
		select {
		case e := <-w.Updates():
			if e == nil { // the end of the records stored so far
				return out, nil
			}
			_, r, step, _, err := contracts.ParseCallKey(e.Key())
			if err != nil {
				return nil, fmt.Errorf("call record %s: %w", e.Key(), err)
			}
			var rec contracts.CallRecord
			if err := contracts.DecodeRecord(e.Value(), &rec); err != nil {
				return nil, fmt.Errorf("call record %s: %w", e.Key(), err)
			}
			out = append(out, runCall{batchID: contracts.BatchID(r, step), rec: rec})
		case <-ctx.Done():
			return nil, fmt.Errorf("read the call records of run %s: %w", run, ctx.Err())
		}
	}
}

// unauditedDecisions names every decision of calls that recs (a run's audit records) have
// no record of: the gate's decision of each decided call, and the resolution of each call
// a ticket parked that a person or the timer resolved. A decision being made while the
// check runs may be named once; checking again after it is recorded clears it. When the
// chain starts at n from > 1 (its records before were pruned, from a checkpoint), a missing
// decision the call record dates before fromTime, the chain's first remaining record, is
// counted as pruned with the records before it instead, at most from-1 of them (the
// records pruned): the gate stores a decision's audit record after it decides.
func unauditedDecisions(recs []auditchain.Record, calls []runCall, from uint64, fromTime time.Time) (missing []string, pruned int, err error) {
	type callOf struct{ batch, call string }
	audited := map[callOf]map[string]bool{}
	for _, r := range recs {
		ev, err := cloudevent.DecodeMsg(r.Header, r.Data)
		if err != nil {
			return nil, 0, fmt.Errorf("audit record seq %d: %w", r.Seq, err)
		}
		if ev.Type != contracts.TypeAudit {
			continue
		}
		var a contracts.AuditRecord
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			return nil, 0, fmt.Errorf("audit record seq %d: %w", r.Seq, err)
		}
		k := callOf{a.BatchID, a.CallID}
		if audited[k] == nil {
			audited[k] = map[string]bool{}
		}
		audited[k][a.Decision] = true
	}
	prunedBefore := func(rec contracts.CallRecord, stages ...string) bool {
		if from <= 1 || uint64(pruned) >= from-1 {
			return false
		}
		for _, m := range rec.Timeline {
			if slices.Contains(stages, m.Stage) && m.At.Before(fromTime) {
				pruned++
				return true
			}
		}
		return false
	}
	for _, c := range calls {
		d := c.rec.Decision
		if d == nil {
			continue
		}
		have := audited[callOf{c.batchID, c.rec.CallID}]
		if label := d.AuditLabel(); !have[label] && !prunedBefore(c.rec, contracts.StageDecided, contracts.StageProbed) {
			missing = append(missing, fmt.Sprintf("decision %s of call %s has no audit record (batch %s)", label, c.rec.CallID, c.batchID))
		}
		if !d.IsWait() || c.rec.ResolvedActor == "" {
			continue
		}
		resolved := false
		for label := range have {
			resolved = resolved || resolutionLabels[label]
		}
		if !resolved && !prunedBefore(c.rec, contracts.StageResumed) {
			missing = append(missing, fmt.Sprintf("resolution by %s of call %s has no audit record (batch %s)", c.rec.ResolvedActor, c.rec.CallID, c.batchID))
		}
	}
	sort.Strings(missing)
	return missing, pruned, nil
}

// ErrTailTruncated: a run's audit chain lacks a record its batch records anchor: the
// publisher recorded the chain's head when it finalized a batch, and the chain no longer
// reaches it (its last records were deleted) or holds another record there.
var ErrTailTruncated = errors.New("the audit chain's tail was truncated")

// batchAnchor is the audit head a finalized batch of a run recorded.
type batchAnchor struct {
	batchID string
	head    contracts.AuditHead
}

// readRunAnchors reads the audit heads the run's published batches recorded in their
// archived records (the publisher writes the head with the archive, after the results).
func readRunAnchors(ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) ([]batchAnchor, error) {
	byBatch := map[string]contracts.AuditHead{}
	add := func(b *contracts.BatchRecord) {
		if b != nil && b.AuditHead != nil {
			byBatch[b.Submission.BatchID()] = *b.AuditHead
		}
	}
	batches, err := js.KeyValue(ctx, names.BatchesBucket())
	if err != nil {
		return nil, fmt.Errorf("batches bucket: %w", err)
	}
	w, err := batches.Watch(ctx, contracts.RunKey(run)+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read the batch records of run %s: %w", run, err)
	}
	defer w.Stop()
	for done := false; !done; {
		select {
		case e := <-w.Updates():
			if e == nil {
				done = true
				continue
			}
			var b contracts.BatchRecord
			if err := contracts.DecodeRecord(e.Value(), &b); err != nil {
				return nil, fmt.Errorf("batch record %s: %w", e.Key(), err)
			}
			add(&b)
		case <-ctx.Done():
			return nil, fmt.Errorf("read the batch records of run %s: %w", run, ctx.Err())
		}
	}
	out := make([]batchAnchor, 0, len(byBatch))
	for id, h := range byBatch {
		out = append(out, batchAnchor{batchID: id, head: h})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].head.N < out[j].head.N || (out[i].head.N == out[j].head.N && out[i].batchID < out[j].batchID)
	})
	return out, nil
}

// truncatedTail names every anchor that recs (a run's audit records, verified as one
// chain) do not hold: a position past the chain's last record (its tail was deleted), or
// one holding a record of another hash (the chain was rewritten from there). Anchors
// before from, the chain's first remaining record when its records before were pruned,
// went with those records.
func truncatedTail(recs []auditchain.Record, anchors []batchAnchor, from uint64) []string {
	byN := map[uint64]string{}
	var last uint64
	for _, r := range recs {
		l, err := auditchain.LinkOf(r.Header)
		if err != nil {
			continue
		}
		byN[l.N] = l.Hash
		last = max(last, l.N)
	}
	anchors = slices.DeleteFunc(slices.Clone(anchors), func(a batchAnchor) bool { return a.head.N < from })
	var out []string
	for _, a := range anchors {
		hash, ok := byN[a.head.N]
		switch {
		case !ok && a.head.N > last:
			out = append(out, fmt.Sprintf("batch %s was finalized with the chain at n %d (hash %s); the chain ends at n %d", a.batchID, a.head.N, a.head.Hash, last))
		case !ok:
			out = append(out, fmt.Sprintf("batch %s was finalized with the chain at n %d (hash %s), which the chain lacks", a.batchID, a.head.N, a.head.Hash))
		case hash != a.head.Hash:
			out = append(out, fmt.Sprintf("batch %s was finalized with the chain at n %d hash %s; the chain holds hash %s there", a.batchID, a.head.N, a.head.Hash, hash))
		}
	}
	return out
}

package gate

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// newCallRecord is the record of call i of b as it is first written: Requested, with the
// recovery policy the batcher pinned from the trusted configuration.
func newCallRecord(b *contracts.BatchRecord, i int) contracts.CallRecord {
	rec := contracts.NewCallRecord(i, b.Submission.Calls[i], b.Pinned[i].Policy)
	if b.ParallelDeclared {
		// Every call of a declared-parallel batch is gated by the batch's recording, so no
		// output of one may gate another, whoever writes the record first.
		rec.RunOutsideSequence()
	}
	return rec
}

// decidedAt returns when the gate decided rec, by either path.
func decidedAt(rec *contracts.CallRecord) (time.Time, bool) {
	if at, ok := rec.MarkTime(contracts.StageDecided); ok {
		return at, true
	}
	return rec.MarkTime(contracts.StageProbed)
}

// withCall adds the batch, call and run of call i of b to the logger of ctx.
func withCall(ctx context.Context, b *contracts.BatchRecord, i int) context.Context {
	sub := &b.Submission
	log := zerolog.Ctx(ctx).With().Str("run_id", sub.RunID).Str("batch_id", sub.BatchID()).
		Str("call_id", sub.Calls[i].CallID).Logger()
	return log.WithContext(ctx)
}

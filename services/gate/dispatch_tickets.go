package gate

import (
	"context"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// ticketDispatch is the dispatch as the ticket handler sees it ([tickets.Dispatch]): the
// call-record reads and writes a resolution needs, and nothing else of the gate.
type ticketDispatch struct{ s *Service }

var _ tickets.Dispatch = ticketDispatch{}

func (d ticketDispatch) LoadCall(ctx context.Context, b *contracts.BatchRecord, i int) (contracts.CallRecord, uint64, error) {
	return d.s.loadCall(ctx, b, i)
}

func (d ticketDispatch) EnterUnlessPaused(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, pause *contracts.ToolPause) error {
	return d.s.enterUnlessPaused(b, i, rec, pause)
}

func (d ticketDispatch) PolicyChain(b *contracts.BatchRecord, call contracts.ToolCall) contracts.GateOutcome {
	return d.s.policyChain(b, call)
}

// CommitResolution returns the effects of a resolution that has passed every check: write
// rec (already moved by the ticket handler and marked ResolvedBy) at rev and delete the
// ticket — handing the call on when rec is its output — then publish the resolution's
// outputs ([Service.realizeResolution]). A lost compare-and-swap is [errRaced] and changes
// nothing, so the handler decides again from the committed state: of two concurrent
// resolutions exactly one commits.
func (d ticketDispatch) CommitResolution(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, rev, ticketRev uint64, res tickets.Resolution) pipeline.Effects {
	s := d.s
	return pipeline.Effects{Op: callOp(b, i), Steps: []pipeline.Effect{
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			if _, err := s.putCall(ctx, b, i, *rec, rev); err != nil {
				return false, err
			}
			if res.Audit != "" {
				// Counted once: only the delivery whose write committed the resolution gets here.
				s.env.Telemetry.GateDecision(res.Audit)
			}
			return true, s.tickets.DeleteTicket(ctx, res.Corr, ticketRev)
		}, handOffsOfRecord(rec)...),
		pipeline.Publish(func(ctx context.Context) error { return s.realizeResolution(ctx, b, i, rec, res) }),
	}}
}

// RedeliveredResolution returns the effects that finish a resolution this very input
// already committed (the call carries its ResolvedBy): the ticket deleted if a crash left
// it, and the outputs re-published under their deterministic ids.
func (d ticketDispatch) RedeliveredResolution(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, res tickets.Resolution) pipeline.Effects {
	s := d.s
	return pipeline.Effects{Op: callOp(b, i), Steps: []pipeline.Effect{
		pipeline.Publish(func(ctx context.Context) error {
			if err := s.tickets.DeleteTicket(ctx, res.Corr, 0); err != nil {
				return err
			}
			return s.realizeResolution(ctx, b, i, rec, res)
		}),
	}}
}

// handOffsOfRecord is who a write of call record rec hands work to: its output, when it
// is terminal, goes to the barrier; an executor request, Executing with its input and not
// entered, to the executor; any other revision to no one (internal/pipeline records.go).
func handOffsOfRecord(rec *contracts.CallRecord) []pipeline.HandOff {
	switch {
	case rec.Phase.IsTerminal():
		return []pipeline.HandOff{pipeline.ToBarrier}
	case rec.ExecutingUnentered() && rec.Input != nil:
		return []pipeline.HandOff{pipeline.ToExecutor}
	}
	return nil
}

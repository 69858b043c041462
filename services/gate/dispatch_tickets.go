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

// CommitResolution returns the effects of a resolution that has passed every check
// ([Service.resolutionEffects]): of two concurrent resolutions exactly one commits.
func (d ticketDispatch) CommitResolution(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, rev, ticketRev uint64, res tickets.Resolution) pipeline.Effects {
	return d.s.resolutionEffects(b, i, rec, rev, ticketRev, res)
}

// RedeliveredResolution returns the effects that finish a resolution this very input
// already committed ([Service.redeliveredResolutionEffects]).
func (d ticketDispatch) RedeliveredResolution(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, res tickets.Resolution) pipeline.Effects {
	return d.s.redeliveredResolutionEffects(b, i, rec, res)
}

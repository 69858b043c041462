package limits

import (
	"context"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Deps is what the limits ledger works with: the runtime and basics of the gate, and the
// ledger bucket it opens on first use.
type Deps struct {
	pipeline.Runtime
	pipeline.Basics
	LedgerOpener
}

// LedgerOpener opens the limits ledger bucket.
type LedgerOpener interface {
	LimitsLedger(ctx context.Context) (*state.Store[contracts.LimitLedgerEntry], error)
}

// DepsOf returns the ledger's dependencies from the environment.
func DepsOf(env *pipeline.Env) Deps {
	return Deps{Runtime: env, Basics: env.Basics(), LedgerOpener: env}
}

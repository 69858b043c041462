package brainexec_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// payments is a fake payment provider that deduplicates by idempotency key, as a real one
// does: the tool charges through it, the reconcile asks it about the key.
type payments struct {
	mu      sync.Mutex
	runs    int
	charged map[string]int // idempotency key → amount
}

type chargeArgs struct {
	Amount int `json:"amount"`
}

func (p *payments) charge(ctx context.Context, a chargeArgs) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	p.charged[tool.IdempotencyKey(ctx)] = a.Amount
	return fmt.Sprintf("charged %d", a.Amount), nil
}

func (p *payments) status(ctx context.Context, a chargeArgs) (contracts.Reconciled, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	amount, ok := p.charged[tool.IdempotencyKey(ctx)]
	if !ok {
		return contracts.NotRun(), nil
	}
	if amount != a.Amount {
		return contracts.Unknown(), nil
	}
	return contracts.Ran(contracts.TextOutput("", fmt.Sprintf("charged %d", amount))), nil
}

func (p *payments) bodyRuns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs
}

// TestGoToolReconcileAfterCrash: a never_replay Go tool registered WithReconcile charges,
// then its executor dies before committing (the in-tool fault); the redelivery asks the
// reconcile, which finds the charge under the call's idempotency key, and the call
// completes with it — the body ran once. The same tool without WithReconcile ends
// indeterminate (what every such call did before the hook: the first case failed so with
// the reconcile disabled).
func TestGoToolReconcileAfterCrash(t *testing.T) {
	for _, withReconcile := range []bool{true, false} {
		t.Run(fmt.Sprintf("reconcile=%v", withReconcile), func(t *testing.T) {
			e := exectest.New(t, withTools(`
  - id: pay
`))
			e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
			p := &payments{charged: map[string]int{}}
			startBrain(t, e, func(r *toolreg.Registry) {
				pay := tool.ToolFunc("pay", "Charges.", contracts.CapabilityNonRecoverable, p.charge)
				if withReconcile {
					pay = tool.WithReconcile(pay, p.status)
				}
				must(t, toolreg.Register(r, pay))
			}, execcore.WithReconcile(execcore.ReconcileOptions{Backoff: 5 * time.Millisecond, Timeout: time.Second}))
			c := brainCall("call_1", "pay", `{"amount":42}`)
			e.Allow(c)
			rec := e.WaitTerminal(c)
			if p.bodyRuns() != 1 || e.Ledger(c) != 1 {
				t.Errorf("body runs %d (ledger %d), want 1", p.bodyRuns(), e.Ledger(c))
			}
			if !withReconcile {
				if rec.Phase.Kind != contracts.PhaseIndeterminate || len(rec.Reconciles) != 0 {
					t.Fatalf("phase %s reconciles %+v, want Indeterminate without a reconcile", rec.Phase.Kind, rec.Reconciles)
				}
				return
			}
			if got, isErr := exectest.Text(t, rec); rec.Phase.Kind != contracts.PhaseCompleted || got != "charged 42" || isErr {
				t.Fatalf("phase %s %q output %q, want Completed \"charged 42\"", rec.Phase.Kind, rec.Phase.Reason, got)
			}
			if len(rec.Reconciles) != 1 || rec.Reconciles[0].Outcome != contracts.ReconcileRan {
				t.Errorf("reconciles %+v, want one, ran", rec.Reconciles)
			}
		})
	}
}

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

const concurrencyConfig = `
prefix: awaken
tools:
  - id: occupy
    capability: replay_safe
  - id: echo
    capability: replay_safe
policy:
  default_behavior: allow
  limits:
    - { name: two-per-tenant, tools: [occupy], key: tenant, concurrency: 2 }
`

// OccupyArgs are the arguments of the test tool occupy, which holds its body until the
// test lets it go.
type OccupyArgs struct{}

// occupancy is what the bodies of occupy count of themselves, per tenant: how many run
// now, and the most that ever ran at once.
type occupancy struct {
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
}

// TestConcurrencyLimitHoldsUnderLoad: under a concurrency of 2 per tenant, twelve runs of
// two tenants (eight of acme, four of globex, every batch two occupy calls in sequence) never have more than two bodies of a tenant running at once — the
// bodies count themselves — and every call runs and is published. Each body holds until
// the test releases one, so the limit is reached, not just respected by a light load: the
// test sees two bodies of each tenant running and the rest of acme's calls queued in the
// ledger before it lets any go.
func TestConcurrencyLimitHoldsUnderLoad(t *testing.T) {
	cfg, err := config.Parse([]byte(concurrencyConfig))
	if err != nil {
		t.Fatal(err)
	}
	occ := &occupancy{running: map[string]int{}, most: map[string]int{}}
	release := make(chan struct{})
	var entered atomic.Int64
	reg := toolreg.NewRegistry()
	if err := toolreg.Register(reg, tool.ToolFunc("occupy", "Holds until the test releases it.", contracts.CapabilityReplaySafe,
		func(ctx context.Context, _ OccupyArgs) (string, error) {
			inv, _ := tool.InvocationFrom(ctx)
			tenant := tenantOf(inv.RunID)
			occ.mu.Lock()
			occ.running[tenant]++
			occ.most[tenant] = max(occ.most[tenant], occ.running[tenant])
			occ.mu.Unlock()
			entered.Add(1)
			defer func() {
				occ.mu.Lock()
				occ.running[tenant]--
				occ.mu.Unlock()
			}()
			select {
			case <-release:
				return "ran", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withConfig(cfg), withOptions(func(o *app.Options) { o.BrainRegistry = reg }))
	ctx := ctxFor(t, 3*waitLong)

	var runs []contracts.BatchSubmission
	for n := range 12 {
		tenant := "acme"
		if n%3 == 2 {
			tenant = "globex"
		}
		sub := batch(fmt.Sprintf("%s-%d", tenant, n), 1, []string{"occupy"},
			call("c0", "occupy", map[string]any{}), call("c1", "occupy", map[string]any{}))
		sub.Tenant = tenant
		runs = append(runs, sub)
	}
	results := make(chan *client.BatchResult, len(runs))
	errs := make(chan error, len(runs))
	for _, sub := range runs {
		go func() {
			res, err := h.client.SubmitAndWait(ctx, sub)
			if err != nil {
				errs <- fmt.Errorf("batch %s: %w", sub.BatchID(), err)
				return
			}
			results <- res
		}()
	}

	// Both tenants fill their two slots; acme's other calls queue behind them.
	_, js := h.srv.Conn(t)
	kv, err := js.KeyValue(ctx, cfg.Names().LimitsBucket())
	if err != nil {
		t.Fatal(err)
	}
	ledger := state.NewStore[contracts.LimitLedgerEntry](kv)
	natstest.WaitFor(t, waitLong, func() bool {
		a, _, err1 := ledger.Get(ctx, contracts.LimitLedgerKey("two-per-tenant", "acme", time.Time{}))
		g, _, err2 := ledger.Get(ctx, contracts.LimitLedgerKey("two-per-tenant", "globex", time.Time{}))
		return err1 == nil && err2 == nil && len(a.Held) == 2 && len(g.Held) == 2 && len(a.Waiting) >= 2 && entered.Load() == 4
	}, "two bodies of each tenant running and acme's next calls queued")

	// Let the bodies go one at a time: each release frees a slot for the next waiter.
	for range 2 * len(runs) {
		select {
		case release <- struct{}{}:
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("a body never started: %d of %d entered", entered.Load(), 2*len(runs))
		}
	}
	for range runs {
		select {
		case res := <-results:
			for _, r := range res.Results {
				if r.Output.IsError || r.Output.Text() != "ran" {
					t.Fatalf("batch %s result %+v, want ran", res.BatchID, r)
				}
			}
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("results missing")
		}
	}
	occ.mu.Lock()
	defer occ.mu.Unlock()
	if occ.most["acme"] != 2 || occ.most["globex"] != 2 {
		t.Fatalf("most bodies at once per tenant %v, want 2 for each (the limit, reached)", occ.most)
	}
	if n := entered.Load(); n != int64(2*len(runs)) {
		t.Fatalf("%d bodies ran, want %d (each call once)", n, 2*len(runs))
	}
	natstest.WaitFor(t, waitLong, func() bool {
		a, _, err := ledger.Get(ctx, contracts.LimitLedgerKey("two-per-tenant", "acme", time.Time{}))
		return err == nil && a.Used == 0 && len(a.Waiting) == 0 && len(a.Handed) == 0
	}, "acme's slots all given back")
}

// tenantOf is the tenant a run of the test belongs to: its id starts with it.
func tenantOf(runID string) string {
	tenant, _, _ := strings.Cut(runID, "-")
	return tenant
}

const meteredConfig = `
prefix: awaken
tools:
  - id: metered
    capability: replay_safe
    cost: 2
policy:
  default_behavior: allow
  limits:
    - { name: spend, tools: [metered], key: thread, budget: { amount: 10 } }
`

// MeteredArgs are the arguments of the test tool metered, which reports what it cost.
type MeteredArgs struct {
	Cost float64 `json:"cost"`
}

// TestBudgetChargesTheCostTheToolReports: metered reserves its configured cost of 2
// against a budget of 10 per thread and reports 7 from its body (executor.ReportCost); the
// budget is charged 7 once the call ends. After two calls (14 spent) the third is blocked
// with budget_exhausted — with the configured cost alone (4 spent) it would have run.
func TestBudgetChargesTheCostTheToolReports(t *testing.T) {
	cfg, err := config.Parse([]byte(meteredConfig))
	if err != nil {
		t.Fatal(err)
	}
	reg := toolreg.NewRegistry()
	if err := toolreg.Register(reg, tool.ToolFunc("metered", "Reports what it cost.", contracts.CapabilityReplaySafe,
		func(ctx context.Context, a MeteredArgs) (string, error) {
			tool.ReportCost(ctx, a.Cost)
			return "metered", nil
		})); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withConfig(cfg), withOptions(func(o *app.Options) { o.BrainRegistry = reg }))
	ctx := ctxFor(t, 2*waitLong)
	_, js := h.srv.Conn(t)
	kv, err := js.KeyValue(ctx, cfg.Names().LimitsBucket())
	if err != nil {
		t.Fatal(err)
	}
	ledger := state.NewStore[contracts.LimitLedgerEntry](kv)
	spent := func() float64 {
		e, _, err := ledger.Get(ctx, contracts.LimitLedgerKey("spend", "thread-metered", time.Time{}))
		if err != nil {
			return -1
		}
		return e.Used
	}
	for step, want := range []float64{7, 14} {
		sub := batch("metered", int64(step+1), []string{"metered"}, call("c0", "metered", map[string]any{"cost": 7}))
		res := h.mustRun(sub)
		if got := res.Results[0].Output.Text(); got != "metered" {
			t.Fatalf("step %d: %q, want the tool's result", step+1, got)
		}
		natstest.WaitFor(t, waitLong, func() bool { return spent() == want }, fmt.Sprintf("%v spent after step %d", want, step+1))
	}
	res := h.mustRun(batch("metered", 3, []string{"metered"}, call("c0", "metered", map[string]any{"cost": 7})))
	if got := res.Results[0].Output.Text(); !strings.Contains(got, "blocked: "+contracts.ReasonBudgetExhausted) {
		t.Fatalf("third call %q, want blocked by the budget", got)
	}
}

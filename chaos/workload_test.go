package chaos_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// chaosConfig is the host configuration every service process loads: the example tools a
// chaos run mixes, a policy that asks for ask_me and denies forbidden, and a one-second
// ack wait so a killed process's messages come back quickly. A run appends its retention
// section ([withRetention]).
const chaosConfig = `prefix: awaken
consumers: { ack_wait: 1s }
tools:
  - { id: echo, target: brain, capability: replay_safe, recovery_policy: { mode: replay_safe, max_attempts: 5 } }
  - { id: counter, target: brain, capability: non_recoverable }
  - { id: slow, target: brain }
  - { id: fail, target: brain }
  - id: delegate
    kind: delegation
    parallel_completion: true
    capability: durable_request
    recovery_policy: { mode: durable_request, max_attempts: 5 }
  - { id: lookup, target: brain, parallel: true }
  - { id: ask_me, builtin: ran, parallel: true }
  - { id: forbidden, builtin: ran, parallel: true }
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask, timeout: 24h }
    - { pattern: forbidden, behavior: deny }
executors:
  brain: { workers: 16, default_timeout: 30s }
  body_ledger: true # the checker counts body runs from it
`

// withRetention is chaosConfig with a retention short enough for the records of finished
// runs to expire many times during a chaos run: runs bounds the batch archive, the call
// and ticket records (swept by the gate when the archive expires), the control and
// tickets streams, and the run record (twice it); events expire as fast. The rest is
// chosen by what must outlive what:
//
//   - submissions outlive the longest outage of the batcher a run injects (a submission
//     that expires unread is a lost batch, by the documented contract, not a bug);
//   - results outlive the run: the publisher's recovery after a crash between its results
//     and its archive looks for them on the stream before publishing again (past the
//     retention it would publish twice, by design), and the driver waits on them;
//   - audit stays forever (built-in): the cluster run verifies the whole chain.
//
// The checker does not depend on any of these: it reads the results, audit and tickets
// streams as the run goes on (checker.Follow), and fails, rather than guess, if one
// expired before it read it.
func withRetention(runs, submissions string) string {
	return chaosConfig + fmt.Sprintf("retention: { runs: %s, events: %s, submissions: %s, results: 1h }\n", runs, runs, submissions)
}

// withPartitions is cfg with storage.partitions p.
func withPartitions(cfg string, p int) string {
	return cfg + fmt.Sprintf("storage: { partitions: %d }\n", p)
}

var chaosTools = []string{"echo", "counter", "slow", "fail", "delegate", "lookup", "ask_me", "forbidden"}

// workload is the batches a run submits, generated from the seed.
type workload struct {
	batches []checker.Batch
	calls   int
}

// newWorkload draws batches of 1–maxCalls calls until there are at least calls calls and
// at least batches batches: one batch in six is a parallel delegation batch, one in six a
// declared-parallel batch (lookup, with a few ask_me and forbidden calls, which declare
// parallel too: gated all first, then run at once), the others mix echo, counter, slow,
// fail, delegate, ask_me (approved by the test) and a few forbidden calls (denied by
// policy).
func newWorkload(rng *rand.Rand, calls, batches, maxCalls int) *workload {
	w := &workload{}
	for i := 0; w.calls < calls || len(w.batches) < batches; i++ {
		run := fmt.Sprintf("chaos-%d", i)
		n := 1 + rng.IntN(maxCalls)
		sub := contracts.BatchSubmission{RunID: run, ThreadID: "thread-" + run, Step: 1,
			Agent: contracts.AgentSnapshot{SnapshotID: "snap-chaos", Tools: chaosTools}}
		expect := map[string]checker.Expectation{}
		mode := 0 // sequential
		if n > 1 {
			mode = max(rng.IntN(6)-3, 0) // 1: parallel delegation, 2: declared parallel
		}
		for j := range n {
			id := fmt.Sprintf("c%d", j)
			var tool string
			var args any
			switch mode {
			case 1:
				tool, args = "delegate", map[string]any{"task": id, "ms": rng.IntN(50)}
			case 2:
				switch r := rng.IntN(100); {
				case r < 80:
					tool, args = "lookup", map[string]any{"ms": 10 + rng.IntN(300)}
				case r < 92:
					tool, args = "ask_me", map[string]any{}
					expect[id] = checker.ExpectApproval
				default:
					tool, args = "forbidden", map[string]any{}
					expect[id] = checker.ExpectDenied
				}
			default:
				switch r := rng.IntN(100); {
				case r < 35:
					tool, args = "echo", map[string]any{"text": run + "/" + id}
				case r < 55:
					tool, args = "counter", map[string]any{"name": run + "-" + id}
				case r < 70:
					tool, args = "slow", map[string]any{"ms": 10 + rng.IntN(300)}
				case r < 80:
					tool, args = "fail", map[string]any{"message": "planned failure"}
				case r < 90:
					tool, args = "delegate", map[string]any{"task": id, "ms": rng.IntN(50)}
				case r < 96:
					tool, args = "ask_me", map[string]any{}
					expect[id] = checker.ExpectApproval
				default:
					tool, args = "forbidden", map[string]any{}
					expect[id] = checker.ExpectDenied
				}
			}
			raw, _ := json.Marshal(args)
			sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: id, ToolID: tool, Arguments: raw})
		}
		w.batches = append(w.batches, checker.Batch{Submission: sub, Expect: expect})
		w.calls += n
	}
	return w
}

// recorder is the history under construction; the submitter and the monkey write to it
// concurrently.
type recorder struct {
	mu sync.Mutex
	h  checker.History
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) submitted(b checker.Batch, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b.SubmittedAt = at
	r.h.Batches = append(r.h.Batches, b)
}

func (r *recorder) killed(target string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Kills = append(r.h.Kills, checker.Kill{Target: target, At: at})
}

// healed records when the fault killed as target at start ended: it disturbed every
// batch in flight in between, also one submitted and published while it lasted.
func (r *recorder) healed(target string, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, k := range r.h.Kills {
		if k.Target == target && k.At.Equal(start) {
			r.h.Kills[i].Until = end
		}
	}
}

func (r *recorder) kills() []checker.Kill {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]checker.Kill(nil), r.h.Kills...)
}

func (r *recorder) history() checker.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Batches = append([]checker.Batch(nil), r.h.Batches...)
	h.Kills = append([]checker.Kill(nil), r.h.Kills...)
	return h
}

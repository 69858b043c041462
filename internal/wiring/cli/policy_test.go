package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// policyTools are the tools of both policies: the backtest changes only the rules.
const policyTools = `
tools:
  - { id: echo, capability: replay_safe, recovery_policy: { mode: replay_safe, max_attempts: 3 } }
  - { id: counter }
  - { id: ask_me, builtin: ran }
  - { id: forbidden, builtin: echo }
`

// policyLiveConfig is the host configuration the recorded batches ran under.
const policyLiveConfig = policyTools + `
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask }
    - { pattern: forbidden, behavior: deny }
`

// policyCandidate is the host configuration the backtest replays them through.
const policyCandidate = policyTools + `
policy:
  default_behavior: ask
  rules:
    - { pattern: echo, behavior: allow }
    - { pattern: 'echo(text ~ "rm *")', behavior: deny }
    - { pattern: forbidden, behavior: allow }
    - { pattern: counter, behavior: deny, shadow: true }
    - { pattern: ask_me, behavior: allow }
`

// TestPolicyTestReplaysTheAuditedDecisions: three runs record five gate decisions under
// the live policy — two published batches (archived) and one parked on an approval (held
// by its run record). `awaken policy test` and POST /v1/policy/test replay them through
// the candidate and print, per call, the old and the new decision and the rule that made
// it, then the counts per rule: the output is the table worked out by hand below. The test
// runs no tool and writes nothing: every stream and bucket holds the same messages
// afterwards. --run narrows the replay to one run's decisions.
//
// By hand, with the candidate (default ask; a deny is absolute; the more specific rule
// wins among the others; shadow rules never decide):
//
//	run-a c1 echo {text: hi}      allow → allow  rules[0] echo
//	run-a c2 forbidden            deny  → allow  rules[2] forbidden
//	run-b c1 counter              allow → ask    default (rules[3], shadow, would deny)
//	run-b c2 echo {text: rm -rf}  allow → deny   rules[1] echo(text ~ "rm *")
//	run-c c1 ask_me               ask   → allow  rules[4] ask_me
//	run-gone c1 echo              allow → (not replayed: no batch record; an audit record the test forges)
func TestPolicyTestReplaysTheAuditedDecisions(t *testing.T) {
	cfg := parseConfig(t, policyLiveConfig)
	wait := servicetest.Context(t, time.Minute)
	srv, st := startStack(t, wait, cfg, contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher, contracts.ServiceAPI)
	c, js := srv.Client, srv.JS
	call := servicetest.CallJSON
	for _, sub := range []contracts.BatchSubmission{
		servicetest.Submission("run-a", 1, call("c1", "echo", map[string]string{"text": "hi"}), call("c2", "forbidden", map[string]string{})),
		servicetest.Submission("run-b", 1, call("c1", "counter", map[string]string{"name": "b"}), call("c2", "echo", map[string]string{"text": "rm -rf"})),
	} {
		if _, err := c.SubmitAndWait(wait, sub); err != nil {
			t.Fatalf("%s: %v", sub.BatchID(), err)
		}
	}
	stacktest.Park(t, wait, c, servicetest.Submission("run-c", 1, call("c1", "ask_me", map[string]string{})), "c1")
	// A decision whose batch record is gone (as when the batches bucket lost it): listed,
	// not replayed.
	gone, err := cloudevent.NewEvent("run-gone:audit", "awaken/test", contracts.TypeAudit, contracts.AuditRecord{
		RunID: "run-gone", BatchID: "tool-batch:run-gone:1", ToolID: "echo", CallID: "c1", Decision: contracts.AuditDecisionAllow, At: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(wait, cloudevent.EncodeMsg(cfg.Names().AuditSubject("run-gone"), gone)); err != nil {
		t.Fatal(err)
	}
	// Settled: both published batches archived, and nothing stored any more.
	batches, err := js.KeyValue(wait, cfg.Names().BatchesBucket())
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		_, errA := batches.Get(wait, contracts.BatchKey("run-a", 1))
		_, errB := batches.Get(wait, contracts.BatchKey("run-b", 1))
		return errA == nil && errB == nil
	}, "both published batches archived")
	before := streamCounts(t, wait, js)
	natstest.WaitFor(t, 30*time.Second, func() bool {
		now := streamCounts(t, wait, js)
		settled := maps.Equal(now, before)
		before = now
		return settled
	}, "the pipeline stored nothing more")

	candidate := filepath.Join(t.TempDir(), "candidate.yaml")
	if err := os.WriteFile(candidate, []byte(policyCandidate), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"policy", "test", "--config", candidate, "--nats-url", srv.URL()}, args...)
		if code := Main(wait, args, &out, &errOut); code != 0 {
			t.Fatalf("awaken %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}

	table := run("--json=false")
	wantTable := `BATCH                  CALL  TOOL       OLD    NEW    CHANGED  RULE
tool-batch:run-a:1     c1    echo       allow  allow  -        rules[0] echo
tool-batch:run-a:1     c2    forbidden  deny   allow  yes      rules[2] forbidden
tool-batch:run-b:1     c1    counter    allow  ask    yes      default
tool-batch:run-b:1     c2    echo       allow  deny   yes      rules[1] echo(text ~ "rm *")
tool-batch:run-c:1     c1    ask_me     ask    allow  yes      rules[4] ask_me
tool-batch:run-gone:1  c1    echo       allow  -      -        not replayed: the batch record is gone

RULE                          CALLS  CHANGED
rules[0] echo                 1      0
rules[1] echo(text ~ "rm *")  1      1
rules[2] forbidden            1      1
rules[3] counter (shadow)     1      1
rules[4] ask_me               1      1
default                       1      1
`
	tableRows, summary, _ := strings.Cut(table, "6 decisions replayed")
	if tableRows != wantTable || !strings.HasPrefix(summary, ", 4 changed, 1 not replayed; oldest ") {
		t.Errorf("awaken policy test printed\n%s\nwant\n%s6 decisions replayed, 4 changed, 1 not replayed; oldest …", table, wantTable)
	}

	var viaCLI httpapi.PolicyTestReport
	if err := json.Unmarshal([]byte(run("--json")), &viaCLI); err != nil {
		t.Fatal(err)
	}
	if viaCLI.Total != 6 || viaCLI.Changed != 4 || viaCLI.Missing != 1 {
		t.Errorf("totals %d/%d/%d, want 6 replayed, 4 changed, 1 missing", viaCLI.Total, viaCLI.Changed, viaCLI.Missing)
	}
	shadow := viaCLI.Calls[2].Shadow
	if len(shadow) != 1 || shadow[0].Rule != "counter" || shadow[0].Would != contracts.AuditDecisionDeny {
		t.Errorf("counter's shadow findings %+v, want rules[3] counter would deny", shadow)
	}

	body, _ := json.Marshal(httpapi.PolicyTestRequest{Config: policyCandidate})
	resp, err := http.Post(strings.TrimSuffix(st.APIService.URL(), "/")+"/v1/policy/test", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var viaHTTP httpapi.PolicyTestReport
	if err := json.NewDecoder(resp.Body).Decode(&viaHTTP); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/policy/test: %d %v", resp.StatusCode, err)
	}
	if !reflect.DeepEqual(viaHTTP, viaCLI) {
		t.Errorf("POST /v1/policy/test answered\n%+v\nwant what the CLI printed\n%+v", viaHTTP, viaCLI)
	}

	bad, _ := json.Marshal(httpapi.PolicyTestRequest{Config: "policy:\n  rules:\n    - { pattern: 'x(', behavior: deny, shadow: true }\n"})
	refused, err := http.Post(strings.TrimSuffix(st.APIService.URL(), "/")+"/v1/policy/test", "application/json", bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Body.Close()
	var apiErr httpapi.Error
	if err := json.NewDecoder(refused.Body).Decode(&apiErr); err != nil || refused.StatusCode != http.StatusBadRequest ||
		apiErr.Code != httpapi.CodeInvalidRequest || !strings.Contains(apiErr.Message, "policy.rules[0].pattern") {
		t.Errorf("a candidate with a bad shadow rule: %d %+v (%v), want 400 invalid_request naming policy.rules[0].pattern", refused.StatusCode, apiErr, err)
	}

	var onlyA httpapi.PolicyTestReport
	if err := json.Unmarshal([]byte(run("--json", "--run", "run-a")), &onlyA); err != nil {
		t.Fatal(err)
	}
	if onlyA.Total != 2 || onlyA.Calls[0].BatchID != "tool-batch:run-a:1" || onlyA.Calls[1].BatchID != "tool-batch:run-a:1" {
		t.Errorf("--run run-a replayed %+v, want run-a's two decisions", onlyA.Calls)
	}

	// The time window: every decision was made in the last hour, none after now.
	future := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	for _, w := range []struct {
		args []string
		want int
	}{
		{[]string{"--since", "1h"}, 6},
		{[]string{"--since", future}, 0},
		{[]string{"--until", "1h"}, 0},
		{[]string{"--since", "1h", "--until", future, "--run", "run-b", "--run", "run-c"}, 3},
	} {
		var rep httpapi.PolicyTestReport
		if err := json.Unmarshal([]byte(run(append([]string{"--json"}, w.args...)...)), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Total != w.want {
			t.Errorf("%v replayed %d decisions, want %d", w.args, rep.Total, w.want)
		}
	}

	if after := streamCounts(t, wait, js); !maps.Equal(after, before) {
		t.Errorf("the backtest wrote: stream counts\nbefore %v\nafter  %v", before, after)
	}
}

// streamCounts is every stream's (buckets' included) message count and last sequence.
func streamCounts(t *testing.T, ctx context.Context, js jetstream.JetStream) map[string][2]uint64 {
	t.Helper()
	out := map[string][2]uint64{}
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		out[info.Config.Name] = [2]uint64{info.State.Msgs, info.State.LastSeq}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

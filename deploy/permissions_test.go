package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/devstack/devstacktest"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// secureStack is the five services and the api on an embedded server that loads
// deploy/nats/auth.conf, each connected as its own user — `awaken dev --secure`, with
// every permission violation any connection meets recorded.
type secureStack struct {
	srv    *server.Server
	pw     map[string]string
	cfg    *config.Config
	client *client.Client
	// apiURL is the base URL of the api's HTTP server ("http://127.0.0.1:PORT/"), and
	// apiService the api serving it.
	apiURL     string
	apiService *api.Service
	// opsAddr is the pipeline's operations listener (/metrics, /healthz, /readyz).
	opsAddr string

	mu         sync.Mutex
	violations []string
}

// startSecureServer starts only the embedded server of a secure stack, with the users of
// deploy/nats/auth.conf and the example configuration; no stream exists yet.
func startSecureServer(t *testing.T) *secureStack {
	t.Helper()
	srv, pw := devstacktest.StartSecure(t)
	cfg, err := config.Load(filepath.Join("..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A host limit on every tool, too high to block anything: the gate then writes the
	// limits ledger and runs its gate-limits consumer, so their grants are exercised.
	count := 1 << 20
	cfg.Policy.Limits = []contracts.LimitConfig{{Name: "secure-count", Tools: []string{"*"}, Key: contracts.LimitKeyRun, Count: &count}}
	return &secureStack{srv: srv, pw: pw, cfg: cfg}
}

func startSecure(t *testing.T) *secureStack {
	t.Helper()
	s := startSecureServer(t)
	// sandbox-exec compiles the WebAssembly tools at start, which takes tens of seconds
	// under the race detector on a loaded 2-core machine.
	ctx := ctxFor(t, 3*time.Minute)
	_, log := s.setUp(t, ctx)
	st := s.startServices(t, ctx, log, app.Options{HTTPAddr: "127.0.0.1:0"})
	s.opsAddr = st.HTTPAddr()
	// The api as the deployments run it: a process of its own (so the tickets gauge reads
	// the bucket through the api user's connection, not the gate's), as the api user.
	s.useAPI(t, s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceAPI},
		API: api.Options{HTTPAddr: "127.0.0.1:0"}}))
	return s
}

// setUp creates the streams and buckets as admin (no service's user may) and returns the
// admin's JetStream and the tests' logger.
func (s *secureStack) setUp(t *testing.T, ctx context.Context) (jetstream.JetStream, zerolog.Logger) {
	t.Helper()
	log := servicerun.NewLogger(os.Stderr, envOr("AWAKEN_TEST_LOG", "error"))
	js, err := jetstream.New(s.connect(t, deploy.UserAdmin))
	if err != nil {
		t.Fatal(err)
	}
	if err := servicerun.Setup(ctx, js, s.cfg, log); err != nil {
		t.Fatal(err)
	}
	return js, log
}

// startServices starts the services o names (every one when none) on the secure server,
// each connected as its own user, and stops them when the test ends. Cleanups run in
// reverse, so a stack started later stops first: an api started after the pipeline stops
// before the gate.
func (s *secureStack) startServices(t *testing.T, ctx context.Context, log zerolog.Logger, o app.Options) *app.Stack {
	t.Helper()
	o.Config, o.NoEnsure, o.Log = s.cfg, true, log
	o.Dial = func(name string) (*nats.Conn, error) {
		return nats.Connect(s.srv.ClientURL(), s.connOptions(strings.TrimPrefix(name, "awaken-"))...)
	}
	st, err := app.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	natstest.StopAtCleanup(t, "stack", 20*time.Second, st.Stop)
	return st
}

// useAPI points the tests' HTTP calls at st's api door and connects the platform's client.
func (s *secureStack) useAPI(t *testing.T, st *app.Stack) {
	t.Helper()
	s.apiURL, s.apiService = st.APIService.URL(), st.APIService
	var err error
	if s.client, err = client.New(s.connect(t, deploy.UserPlatform)); err != nil {
		t.Fatal(err)
	}
}

// largeOutput is the stored output of the "stores a large output" checks, and
// largeOutputDigest the hex SHA-256 its object name carries (readers verify it).
var (
	largeOutput       = []byte(strings.Repeat("large ", 50_000))
	largeOutputDigest = func() string { sum := sha256.Sum256(largeOutput); return hex.EncodeToString(sum[:]) }()
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// connOptions connect as user, with a service user's own inbox prefix, recording
// violations.
func (s *secureStack) connOptions(user string) []nats.Option {
	opts := []nats.Option{nats.Name("test-" + user), nats.UserInfo(user, s.pw[user]), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation") {
				s.mu.Lock()
				s.violations = append(s.violations, user+": "+err.Error())
				s.mu.Unlock()
			}
		})}
	for _, svc := range deploy.ServiceUsers() {
		if svc == user {
			opts = append(opts, nats.CustomInboxPrefix(deploy.ServiceInboxPrefix(svc)))
		}
	}
	return opts
}

// connect connects as user ([secureStack.connOptions]) until the test ends.
func (s *secureStack) connect(t *testing.T, user string) *nats.Conn {
	t.Helper()
	return servicetest.Connect(t, s.srv.ClientURL(), s.connOptions(user)...)
}

func (s *secureStack) takeViolations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.violations
	s.violations = nil
	return v
}

// TestSecure_pipelineNeedsNoMorePermission runs the whole acceptance flow with every
// service as its own least-privilege user, plus the rarely taken paths a flow does not
// reach (dead letters, the publisher's "already published?" scan, consumer info after a
// lost consumer), and requires that no connection met a single permission violation:
// the grants of deploy/nats/auth.conf are sufficient.
func TestSecure_pipelineNeedsNoMorePermission(t *testing.T) {
	t.Parallel() // no Docker: overlaps the (sequential) container tests
	s := startSecure(t)
	acceptanceFlow(t, s.client, "secure")

	ctx := ctxFor(t, time.Minute)
	names := s.cfg.Names()
	// userCheck is one thing user must be allowed to do.
	type userCheck struct {
		name string
		user string
		do   func(js jetstream.JetStream) error
	}
	rare := []userCheck{
		{"publisher reads the last result of a run", "publisher", func(js jetstream.JetStream) error {
			st, err := js.Stream(ctx, names.ResultsStream())
			if err != nil {
				return err
			}
			_, err = st.GetLastMsgForSubject(ctx, names.ResultsSubject("secure-run-mixed"))
			return err
		}},
		{"publisher scans a run's results headers only", "publisher", func(js jetstream.JetStream) error {
			cons, err := js.OrderedConsumer(ctx, names.ResultsStream(), jetstream.OrderedConsumerConfig{
				FilterSubjects: []string{names.ResultsSubject("secure-run-mixed")}, HeadersOnly: true})
			if err != nil {
				return err
			}
			_, err = cons.Next(jetstream.FetchMaxWait(10 * time.Second))
			return err
		}},
		// The sweeps' purges of the ledger keys of an expired run or batch (no run expires
		// within this test), bounded by the ledger's last sequence as the sweeps bound them.
		{"gate purges an expired run's ledger keys", "gate", func(js jetstream.JetStream) error {
			bucket := names.LimitsBucket()
			st, err := js.Stream(ctx, contracts.RecordStream(bucket))
			if err != nil {
				return err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return err
			}
			key := contracts.LimitLedgerKey("secure-count", "secure-expired-run", time.Time{})
			return st.Purge(ctx, jetstream.WithPurgeSubject(contracts.RecordSubject(bucket, key)),
				jetstream.WithPurgeSequence(info.State.LastSeq+1))
		}},
	}
	for _, user := range []string{"brain-exec", "sandbox-exec"} {
		rare = append(rare, userCheck{user + " hears the gate's stop notices", user, func(js jetstream.JetStream) error {
			sub, err := js.Conn().SubscribeSync(names.CallStopSubject())
			if err != nil {
				return err
			}
			defer sub.Unsubscribe()
			return js.Conn().Flush()
		}}, userCheck{user + " stores a large output", user, func(js jetstream.JetStream) error {
			st, err := js.ObjectStore(ctx, names.ObjectsBucket())
			if err != nil {
				return err
			}
			name := contracts.ObjectName(contracts.OperationID("secure-"+user, 1, "c1"), largeOutputDigest)
			if _, err := st.GetInfo(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
				return err
			}
			_, err = st.PutBytes(ctx, name, largeOutput)
			return err
		}}, userCheck{user + " publishes tool progress", user, func(js jetstream.JetStream) error {
			if err := js.Conn().Publish(names.EventsSubject("secure-"+user), []byte("{}")); err != nil {
				return err
			}
			return js.Conn().Flush()
		}})
	}
	rare = append(rare, userCheck{"platform hears the live facts", "platform", func(js jetstream.JetStream) error {
		sub, err := js.Conn().SubscribeSync(names.FactsSubject("secure-run"))
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		return js.Conn().Flush()
	}})
	for _, user := range []string{"api", "platform"} {
		rare = append(rare, userCheck{user + " reads a stored output", user, func(js jetstream.JetStream) error {
			c, err := client.New(js.Conn())
			if err != nil {
				return err
			}
			name := contracts.ObjectName(contracts.OperationID("secure-brain-exec", 1, "c1"), largeOutputDigest)
			data, _, err := c.Object(ctx, name)
			if err == nil && len(data) != 300_000 {
				err = fmt.Errorf("read %d bytes, want 300000", len(data))
			}
			return err
		}})
	}
	for _, durable := range []struct{ user, stream, name string }{
		{"batcher", names.SubmissionsStream(), contracts.ConsumerBatcherSubmit},
		{"gate", names.RunRecordsStream(), contracts.ConsumerGateBatches},
		{"gate", names.CallRecordsStream(), contracts.ConsumerGateOutputs},
		{"gate", names.ControlStream(), contracts.ConsumerGateResume},
		{"gate", names.TimersStream(), contracts.ConsumerGateTimers},
		{"gate", names.ControlStream(), contracts.ConsumerGateControl},
		{"gate", contracts.RecordStream(names.BatchesBucket()), contracts.ConsumerGateSweeper},
		{"gate", names.RunRecordsStream(), contracts.ConsumerGateRunSweeper},
		{"brain-exec", names.CallRecordsStream(), contracts.ConsumerBrainExec},
		{"sandbox-exec", names.CallRecordsStream(), contracts.ConsumerSandboxExec},
		{"publisher", names.CallRecordsStream(), contracts.ConsumerPublisher},
	} {
		rare = append(rare,
			userCheck{durable.user + " reads consumer info of " + durable.name, durable.user, func(js jetstream.JetStream) error {
				_, err := js.Consumer(ctx, durable.stream, durable.name)
				return err
			}},
			userCheck{durable.user + " dead-letters for " + durable.name, durable.user, func(js jetstream.JetStream) error {
				_, err := js.Publish(ctx, names.DeadLetterSubject(durable.name), []byte("test"))
				return err
			}})
	}
	t.Run("gate scans the tickets bucket for its /metrics", func(t *testing.T) {
		status, body := apiDo(t, ctx, "GET", "http://"+s.opsAddr, "/metrics", nil, nil)
		if status != http.StatusOK || !strings.Contains(body, telemetry.MetricTicketsScrape+" 0\n") {
			t.Fatalf("GET /metrics: %d, tickets scrape failed:\n%s", status, body)
		}
	})
	for _, r := range rare {
		t.Run(r.name, func(t *testing.T) {
			js, err := jetstream.New(s.connect(t, r.user))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.do(js); err != nil {
				t.Fatal(err)
			}
		})
	}
	if v := s.takeViolations(); len(v) > 0 {
		t.Fatalf("%d permission violations:\n%s", len(v), strings.Join(v, "\n"))
	}
}

// TestSecure_partitionsNeedNoMorePermission runs the acceptance flow on a deployment of
// two partitions whose server loads the grants `awaken nats-auth --partitions 2` prints
// ([deploy.PartitionedAuthConf]), every service as its own user: its first run lands in
// partition 1 (the others where their ids hash), and no connection may meet a permission
// violation.
func TestSecure_partitionsNeedNoMorePermission(t *testing.T) {
	t.Parallel() // no Docker: overlaps the (sequential) container tests
	const partitions = 2
	srv, pw := devstacktest.StartSecurePartitions(t, partitions)
	cfg, err := config.Load(filepath.Join("..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Storage.Partitions = partitions
	s := &secureStack{srv: srv, pw: pw, cfg: cfg}
	ctx := ctxFor(t, 3*time.Minute)
	_, log := s.setUp(t, ctx)
	s.startServices(t, ctx, log, app.Options{HTTPAddr: "127.0.0.1:0"})
	s.useAPI(t, s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceAPI},
		API: api.Options{HTTPAddr: "127.0.0.1:0"}}))

	// The tag that puts the flow's first run (the example batch's) in partition 1.
	names, first := cfg.Names(), exampleBatch(t, "batch-mixed.json").RunID
	tag := ""
	for i := 0; tag == ""; i++ {
		if c := fmt.Sprintf("part%d", i); names.PartitionOf(c+"-"+first) == 1 {
			tag = c
		}
	}
	acceptanceFlow(t, s.client, tag)
	if v := s.takeViolations(); len(v) > 0 {
		t.Fatalf("%d permission violations at %d partitions:\n%s", len(v), partitions, strings.Join(v, "\n"))
	}
}

// TestSecure_apiNeedsNoMorePermission drives every door of the api — each HTTP route, the
// event stream, /metrics, each micro endpoint and the micro discovery subjects ($SRV
// PING/INFO/STATS, bare, by name and by id), refusals included — with the api connected
// as its own least-privilege user, and requires that no connection met a permission
// violation: the api user's grants are sufficient.
func TestSecure_apiNeedsNoMorePermission(t *testing.T) {
	t.Parallel() // no Docker: overlaps the (sequential) container tests
	s := startSecure(t)
	ctx := ctxFor(t, 2*time.Minute)
	base := s.apiURL
	// Every request of this test is matched to the api's routes: one with no request
	// fails it at the end, so a route added later is driven here too.
	cov := newRouteCoverage(s.apiService.Routes())
	do := func(method, path string, body, out any) (int, string) {
		t.Helper()
		cov.saw(method, path)
		return apiDo(t, ctx, method, base, path, body, out)
	}
	// Operators reach the micro service as admin: no other user may publish there.
	admin := s.connect(t, deploy.UserAdmin)
	var microCov microCoverage
	microReq := func(endpoint string, body any) *nats.Msg {
		t.Helper()
		microCov.saw(httpapi.MicroSubject(contracts.DefaultPrefix, endpoint))
		var data []byte
		if body != nil {
			var err error
			if data, err = json.Marshal(body); err != nil {
				t.Fatal(err)
			}
		}
		m, err := admin.RequestWithContext(ctx, httpapi.MicroSubject(contracts.DefaultPrefix, endpoint), data)
		if err != nil {
			t.Fatalf("micro %s: %v", endpoint, err)
		}
		return m
	}

	cov.saw("GET", "/v1/stream")
	events := apiEvents(t, ctx, base)
	waitEvents(t, ctx, events, api.EventHello)

	// Six runs, each parked on an approval: approved over HTTP, denied over micro,
	// cancelled over HTTP and over micro, and the parked call alone cancelled over HTTP and
	// over micro.
	runs := []string{"api-approve", "api-deny", "api-cancel-http", "api-cancel-micro", "api-callcancel-http", "api-callcancel-micro"}
	tickets := make(map[string]contracts.ResumeTicket)
	for _, run := range runs {
		sub := batch(run, 1, []string{"ask_me", "echo"}, call("c1", "ask_me", map[string]any{}),
			call("c2", "echo", map[string]any{"text": "after"}))
		tickets[run] = stacktest.Park(t, ctx, s.client, sub, "c1")
	}
	waitEvents(t, ctx, events, api.EventTicket, api.EventBatch, api.EventCall)

	var list httpapi.TicketList
	if st, body := do("GET", "/v1/tickets", nil, &list); st != http.StatusOK || len(list.Tickets) < len(runs) {
		t.Fatalf("GET /v1/tickets: %d, %d tickets: %s", st, len(list.Tickets), body)
	}
	// The tool catalog: brain-exec published its descriptors as its own user, the api
	// reads them, and the platform asks the api for it over micro.
	var cat contracts.ToolCatalog
	if st, body := do("GET", "/v1/tools?agent_tools=echo", nil, &cat); st != http.StatusOK ||
		len(cat.Tools) != 1 || !strings.Contains(string(cat.Tools[0].Parameters), `"text"`) {
		t.Errorf("GET /v1/tools: %d %s", st, body)
	}
	microCov.saw(httpapi.MicroSubject(contracts.DefaultPrefix, httpapi.EndpointToolsList))
	if tools, err := s.client.Tools(ctx, "echo"); err != nil || len(tools) != 1 || !strings.Contains(string(tools[0].Parameters), `"text"`) {
		t.Errorf("platform client.Tools: %v %+v", err, tools)
	}
	// The limits' use: the api lists and reads the ledger the gate wrote for the runs above.
	var limits struct {
		Use []contracts.LimitUse `json:"use"`
	}
	if st, body := do("GET", "/v1/limits", nil, &limits); st != http.StatusOK || len(limits.Use) == 0 {
		t.Errorf("GET /v1/limits: %d %s", st, body)
	}
	// The kill switch: pause over HTTP and resume over micro, then the other way round. The
	// api writes the tool pauses bucket and the audit record as its own user.
	if st, body := do("POST", "/v1/tools/counter/pause", contracts.ToolPauseRequest{Reason: "grants"}, nil); st != http.StatusOK {
		t.Errorf("POST pause: %d %s", st, body)
	}
	if m := microReq(httpapi.EndpointToolsResume, contracts.ToolPauseRequest{ToolID: "counter"}); m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("micro tools.resume: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	if m := microReq(httpapi.EndpointToolsPause, contracts.ToolPauseRequest{ToolID: "counter", Reason: "grants"}); m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("micro tools.pause: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	if st, body := do("POST", "/v1/tools/counter/resume", struct{}{}, nil); st != http.StatusOK {
		t.Errorf("POST resume: %d %s", st, body)
	}
	approve := tickets["api-approve"].CorrelationID
	if st, body := do("GET", "/v1/tickets/"+approve, nil, nil); st != http.StatusOK {
		t.Fatalf("GET ticket: %d %s", st, body)
	}
	var res contracts.TicketResolution
	// With edited arguments: the gate validates them against the schema brain-exec
	// published (it reads the tools bucket as its own user) and gates them again.
	if st, body := do("POST", "/v1/tickets/"+approve+"/approve",
		httpapi.ApproveRequest{Note: "ok", Arguments: json.RawMessage(`{"edited":true}`)}, &res); st != http.StatusOK || res.Code != "approved" {
		t.Fatalf("approve over HTTP: %d %s", st, body)
	}
	// Resolved: the api reads the batch and call records to tell 409 from 404.
	if st, body := do("POST", "/v1/tickets/"+approve+"/deny", httpapi.DenyRequest{Reason: "late"}, nil); st != http.StatusConflict {
		t.Errorf("deny after approval: %d %s, want 409", st, body)
	}
	if st, body := do("POST", "/v1/tickets/perm.api-none.1.c1/approve", httpapi.ApproveRequest{}, nil); st != http.StatusNotFound {
		t.Errorf("approve of a ticket never opened: %d %s, want 404", st, body)
	}
	if st, body := do("POST", "/v1/runs/api-cancel-http/cancel", map[string]string{"reason": "http"}, nil); st != http.StatusOK {
		t.Errorf("cancel over HTTP: %d %s", st, body)
	}
	// One call cancelled: the api publishes the command and watches the call record.
	if st, body := do("POST", "/v1/calls/"+contracts.OperationID("api-callcancel-http", 1, "c1")+"/cancel", map[string]string{}, nil); st != http.StatusOK {
		t.Errorf("call cancel over HTTP: %d %s", st, body)
	}

	deny := tickets["api-deny"].CorrelationID
	if m := microReq(httpapi.EndpointTicketsList, nil); m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("micro tickets.list: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	if m := microReq(httpapi.EndpointTicketsGet, deny); m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("micro tickets.get: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	// On the per-user subject, recorded as decided by nats:admin.
	resolveAs := strings.Replace(httpapi.EndpointTicketsResolveAs, "{user}", deploy.UserAdmin, 1)
	if m := microReq(resolveAs, httpapi.ShortDecision{CorrelationID: deny, Decision: contracts.DecisionDeny, Reason: "no"}); m.Header.Get(micro.ErrorCodeHeader) != "" ||
		!strings.Contains(string(m.Data), `"actor":"nats:`+deploy.UserAdmin+`"`) {
		t.Errorf("micro tickets.resolve as admin: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	// A complete resume command for the same, now resolved ticket: the gate refuses it.
	full := contracts.ResumeCommandFromTicket(tickets["api-deny"], contracts.ResumeResult{
		Permission: &contracts.PermissionDecision{Decision: contracts.DecisionAllow}})
	if m := microReq(httpapi.EndpointTicketsResolve, full); m.Header.Get(micro.ErrorCodeHeader) != string(contracts.ResumeNotWaiting) {
		t.Errorf("micro resolve of a resolved ticket: code %q %s, want %s", m.Header.Get(micro.ErrorCodeHeader), m.Data, contracts.ResumeNotWaiting)
	}
	if m := microReq(httpapi.EndpointRunsCancel, "api-cancel-micro"); m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("micro runs.cancel: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	if m := microReq(httpapi.EndpointCallsCancel, contracts.OperationID("api-callcancel-micro", 1, "c1")); m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("micro calls.cancel: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}

	for run, want := range map[string][]string{
		"api-approve": {"", "after"}, "api-deny": {"blocked: no", "after"},
		"api-cancel-http": {"", ""}, "api-cancel-micro": {"", ""},
		"api-callcancel-http": {contracts.CancelledBeforeStartPrefix, "after"}, "api-callcancel-micro": {contracts.CancelledBeforeStartPrefix, "after"},
	} {
		r, err := s.client.Await(ctx, run, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantTexts(t, r, want...)
		if strings.HasPrefix(run, "api-cancel") && r.Results[0].Outcome != contracts.OutcomeIndeterminate {
			t.Errorf("%s: %s after cancel", run, r.Results[0].Outcome)
		}
	}

	// An operator resolves the calls the runs' cancels left indeterminate, after their
	// batches were published: over HTTP and over micro, each recorded and its correction
	// seen on the results stream by the api.
	var resolved client.CallResolveResult
	if st, body := do("POST", "/v1/calls/"+contracts.OperationID("api-cancel-http", 1, "c1")+"/resolve",
		httpapi.CallResolveRequest{Outcome: contracts.ReconcileNotRun, Note: "grants"}, &resolved); st != http.StatusOK || resolved.Status != contracts.ResolutionCorrected {
		t.Errorf("POST resolve of a published call: %d %s, want 200 %s", st, body, contracts.ResolutionCorrected)
	}
	if m := microReq(httpapi.EndpointCallsResolve, httpapi.CallResolveRequest{OperationID: contracts.OperationID("api-cancel-micro", 1, "c1"),
		Outcome: contracts.ReconcileNotRun, Note: "grants"}); m.Header.Get(micro.ErrorCodeHeader) != "" || !strings.Contains(string(m.Data), contracts.ResolutionCorrected) {
		t.Errorf("micro calls.resolve of a published call: %s %s", m.Header.Get(micro.ErrorHeader), m.Data)
	}
	// The policy test reads the audit stream: every run, and two of them.
	exampleConfig, err := os.ReadFile(filepath.Join("..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, runs := range [][]string{nil, {"api-approve", "api-deny"}} {
		var rep httpapi.PolicyTestReport
		st, body := do("POST", "/v1/policy/test", httpapi.PolicyTestRequest{Config: string(exampleConfig), Runs: runs}, &rep)
		// The ask_me and the echo of api-approve and of api-deny were decided and audited
		// (of the cancelled runs, fewer).
		if st != http.StatusOK || rep.Total < 4 || (runs != nil && rep.Total != 4) {
			t.Errorf("POST /v1/policy/test of runs %v: %d, %d calls: %s", runs, st, rep.Total, body)
		}
	}
	var session httpapi.Session
	if st, body := do("GET", "/v1/session", nil, &session); st != http.StatusOK || len(session.Roles) == 0 {
		t.Errorf("GET /v1/session: %d %s", st, body)
	}
	// A stored output, written by brain-exec as its own user and read by the api.
	exec, err := jetstream.New(s.connect(t, "brain-exec"))
	if err != nil {
		t.Fatal(err)
	}
	objects, err := exec.ObjectStore(ctx, s.cfg.Names().ObjectsBucket())
	if err != nil {
		t.Fatal(err)
	}
	object := contracts.ObjectName(contracts.OperationID("api-object", 1, "c1"), largeOutputDigest)
	if _, err := objects.PutBytes(ctx, object, largeOutput); err != nil {
		t.Fatal(err)
	}
	if st, body := do("GET", "/v1/objects/"+object, nil, nil); st != http.StatusOK || body != string(largeOutput) {
		t.Errorf("GET /v1/objects/{name}: %d, %d bytes", st, len(body))
	}

	var one httpapi.BatchView
	if st, body := do("GET", "/v1/batches/"+contracts.BatchID("api-approve", 1), nil, &one); st != http.StatusOK || one.Terminal != 2 {
		t.Errorf("GET batch: %d, %d terminal calls: %s", st, one.Terminal, body)
	}
	var all httpapi.BatchList
	if st, body := do("GET", "/v1/batches?limit=200", nil, &all); st != http.StatusOK || len(all.Batches) < len(runs) {
		t.Errorf("GET batches: %d, %d batches: %s", st, len(all.Batches), body)
	}
	if st, body := do("GET", "/v1/batches?run_id=api-deny", nil, &all); st != http.StatusOK || len(all.Batches) != 1 {
		t.Errorf("GET batches of a run: %d, %d batches: %s", st, len(all.Batches), body)
	}
	// /metrics scans the tickets bucket through the api's own connection.
	if st, body := do("GET", "/metrics", nil, nil); st != http.StatusOK ||
		!strings.Contains(body, telemetry.MetricTicketsOpen+" ") || !strings.Contains(body, telemetry.MetricTicketsScrape+" 0\n") {
		t.Errorf("GET /metrics: %d, tickets gauge missing or its scrape failed:\n%s", st, body)
	}
	if st, body := do("GET", "/readyz", nil, nil); st != http.StatusOK {
		t.Errorf("GET /readyz: %d %s", st, body)
	}

	// The batch door: a submission, one waited for, an identical resubmission waited for
	// (read from the stream), its results, a conflicting one refused by the batcher, and
	// the run's results stream.
	door := batch("api-door", 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "door"}))
	waited := batch("api-door-wait", 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "waited"}))
	if st, body := do("POST", "/v1/batches", door, nil); st != http.StatusAccepted {
		t.Errorf("POST /v1/batches: %d %s", st, body)
	}
	for _, sub := range []contracts.BatchSubmission{waited, door} {
		var out httpapi.BatchResults
		if st, body := do("POST", "/v1/batches?wait=60s", sub, &out); st != http.StatusOK || len(out.Results) != 1 {
			t.Errorf("POST /v1/batches?wait of %s: %d %s", sub.RunID, st, body)
		}
	}
	if st, body := do("GET", "/v1/batches/"+door.BatchID()+"/results", nil, nil); st != http.StatusOK {
		t.Errorf("GET batch results: %d %s", st, body)
	}
	conflict := batch("api-door-wait", 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "other"}))
	if st, body := do("POST", "/v1/batches?wait=60s", conflict, nil); st != http.StatusConflict {
		t.Errorf("POST of a conflicting batch: %d %s, want 409", st, body)
	}
	// A batch parked on an approval outlasts its wait (202 pending); meanwhile the api asks
	// whether the batcher settled the submission (its consumer's ack floor).
	parked := batch("api-door-parked", 1, []string{"ask_me"}, call("c1", "ask_me", map[string]any{}))
	if st, body := do("POST", "/v1/batches?wait=2s", parked, nil); st != http.StatusAccepted {
		t.Errorf("POST of a parked batch with wait: %d %s, want 202", st, body)
	}
	cov.saw("GET", "/v1/runs/api-door-wait/results")
	waitEvents(t, ctx, apiEventsAt(t, ctx, base, "/v1/runs/api-door-wait/results"), httpapi.EventRunBatch)

	// Discovery, as `nats micro ls|info|stats` asks: bare, by name, by id.
	ping, err := admin.RequestWithContext(ctx, "$SRV.PING.awaken", nil)
	if err != nil {
		t.Fatal(err)
	}
	var id struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(ping.Data, &id); err != nil || id.ID == "" {
		t.Fatalf("ping answer %s: %v", ping.Data, err)
	}
	for _, verb := range []micro.Verb{micro.PingVerb, micro.InfoVerb, micro.StatsVerb} {
		for _, subj := range []struct{ kind, id string }{{"", ""}, {api.MicroName, ""}, {api.MicroName, id.ID}} {
			subject, err := micro.ControlSubject(verb, subj.kind, subj.id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.RequestWithContext(ctx, subject, nil); err != nil {
				t.Errorf("%s: %v", subject, err)
			}
		}
	}

	cov.requireEvery(t)
	infoMsg, err := admin.RequestWithContext(ctx, "$SRV.INFO."+api.MicroName, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(infoMsg.Data, &info); err != nil {
		t.Fatalf("micro info %s: %v", infoMsg.Data, err)
	}
	microCov.requireEvery(t, info)
	if v := s.takeViolations(); len(v) > 0 {
		t.Fatalf("%d permission violations:\n%s", len(v), strings.Join(v, "\n"))
	}
}

// TestSecure_leastPrivilege checks that each user is refused what it must not do: the
// platform publishing executor requests, results, recorded batches (the gate's work) or
// decisions, or touching the services' consumers; executors publishing results, recorded batches or gate
// decisions; and so on. Each refusal must be a permission violation naming the subject,
// and afterwards the streams hold nothing on the forged subjects: nothing was executed
// or published.
func TestSecure_leastPrivilege(t *testing.T) {
	t.Parallel() // no Docker: overlaps the (sequential) container tests
	s := startSecure(t)
	names := s.cfg.Names()
	const forged = "forged"
	op := contracts.OperationID(forged, 1, "c1")
	execReq := func(target contracts.ToolExecutionTarget) func(nc *nats.Conn) (string, error) {
		// An executor request is the gate's revision of the call record under the target's key.
		return pubEvent(names.CallRecordSubject(contracts.CallKey(target, forged, 1, "c1")), op+":exec:1", contracts.TypeExecRequest,
			contracts.CallRecord{Index: 0, CallID: "c1", ToolID: "counter", Phase: contracts.ExecutingPhase(1),
				Policy: contracts.DefaultRecoveryPolicy(), Input: []byte(`{}`)})
	}
	result := pubEvent(names.ResultsSubject(forged), op+":result", contracts.TypeToolResult,
		contracts.ToolResultEvent{BatchID: contracts.BatchID(forged, 1), RunID: forged, CallID: "c1", ToolID: "counter",
			Outcome: contracts.OutcomeCompleted, Output: contracts.TextOutput("c1", "forged")})
	// The gate's work for a batch is the run-record revision that records it.
	forgedStep := int64(1)
	gateReq := pubEvent(names.RunRecordSubject(forged), contracts.BatchID(forged, 1)+":recorded",
		contracts.TypeBatchRecorded, contracts.RunRecord{RunID: forged, ActiveStep: &forgedStep, Batch: &contracts.BatchRecord{
			Submission: contracts.BatchSubmission{RunID: forged, Step: 1}, Phase: contracts.BatchPhaseOpen}})
	// A call output is the terminal revision of the call's record, written as a CloudEvent.
	output := pubEvent(names.CallRecordSubject(contracts.CallKey(contracts.TargetBrain, forged, 1, "c1")), op+":output", contracts.TypeCallOutput,
		contracts.CallRecord{Index: 0, CallID: "c1", ToolID: "counter", Phase: contracts.CompletedPhase(contracts.TextOutput("c1", "forged"))})
	decision := pubEvent(names.TicketResolvedSubject(), "forged:resolved", contracts.TypeTicketResolved,
		contracts.TicketResolution{CorrelationID: "perm.forged.1.c1", Code: "approved"})
	audit := pubEvent(names.AuditSubject(forged), op+":audit:allow", contracts.TypeAudit, map[string]string{"decision": "allow"})
	unchanged := pubEvent(names.UnchangedSubject(forged), "forged:unchanged", contracts.TypeBatchUnchanged,
		contracts.BatchUnchanged{BatchID: contracts.BatchID(forged, 1), RunID: forged, EventID: "forged",
			Phase: contracts.BatchPhasePublished, ResultsSubject: names.ResultsSubject(forged)})
	raw := func(subject string) func(nc *nats.Conn) (string, error) {
		return func(nc *nats.Conn) (string, error) { return subject, nc.Publish(subject, []byte("{}")) }
	}
	sub := func(subject string) func(nc *nats.Conn) (string, error) {
		return func(nc *nats.Conn) (string, error) {
			_, err := nc.Subscribe(subject, func(*nats.Msg) {})
			return subject, err
		}
	}
	type refusal struct {
		name string
		user string
		act  func(nc *nats.Conn) (subject string, err error)
	}
	tests := []refusal{
		{"platform cannot write a call record", "platform", raw("$KV." + names.CallsBucket() + ".forged.1.c1")},
		{"platform cannot pull the batcher's submissions", "platform", raw("$JS.API.CONSUMER.MSG.NEXT." + names.SubmissionsStream() + "." + contracts.ConsumerBatcherSubmit)},
		{"platform cannot pull the gate's resumes", "platform", raw("$JS.API.CONSUMER.MSG.NEXT." + names.ControlStream() + "." + contracts.ConsumerGateResume)},
		{"platform cannot delete the gate's timer consumer", "platform", raw("$JS.API.CONSUMER.DELETE." + names.TimersStream() + "." + contracts.ConsumerGateTimers)},
		{"platform cannot delete the batcher's consumer", "platform", raw("$JS.API.CONSUMER.DELETE." + names.SubmissionsStream() + "." + contracts.ConsumerBatcherSubmit)},
		{"platform cannot redirect the batcher's consumer", "platform", raw("$JS.API.CONSUMER.CREATE." + names.SubmissionsStream() + "." + contracts.ConsumerBatcherSubmit + "." + names.RejectedSubject())},
		{"platform cannot ack for the gate", "platform", raw("$JS.ACK." + names.ControlStream() + "." + contracts.ConsumerGateResume + ".1.1.1.1.0")},
		// Only services write the audit stream and the tickets stream, which deduplicate
		// the services' records by id across all their subjects.
		{"platform cannot publish into the audit stream", "platform", raw(names.MCPCallAuditSubject())},
		{"platform cannot publish a ticket record", "platform", raw(names.TicketOpenedSubject())},
		// The api's resume subject: the gate records its actors as authenticated.
		{"platform cannot publish on the api's resume subject", "platform", raw(names.TicketResumeAPISubject())},
		{"platform cannot re-create the gate's resume consumer", "platform", raw("$JS.API.CONSUMER.CREATE." + names.ControlStream() + "." + contracts.ConsumerGateResume)},
		{"batcher cannot publish on the api's resume subject", "batcher", raw(names.TicketResumeAPISubject())},
		{"gate cannot publish on the api's resume subject", "gate", raw(names.TicketResumeAPISubject())},
		{"brain-exec cannot publish on the api's resume subject", "brain-exec", raw(names.TicketResumeAPISubject())},
		{"api cannot publish on the public resume subject", "api", raw(names.TicketResumeSubject())},
		{"platform cannot consume the run records", "platform", raw("$JS.API.CONSUMER.CREATE." + names.RunRecordsStream() + ".spy.$KV." + names.RunsBucket() + ".>")},
		{"platform cannot delete the results stream", "platform", raw("$JS.API.STREAM.DELETE." + names.ResultsStream())},
		{"platform cannot read the gate's replies", "platform", sub(deploy.ServiceInboxPrefix("gate") + ".>")},
		{"brain-exec cannot publish a result", "brain-exec", result},
		{"brain-exec cannot record a batch for the gate", "brain-exec", gateReq},
		// An executor writes its own target's records only: it cannot hand a call to another.
		{"brain-exec cannot publish a sandbox executor request", "brain-exec", execReq(contracts.TargetSandbox)},
		{"sandbox-exec cannot publish a brain executor request", "sandbox-exec", execReq(contracts.TargetBrain)},
		{"brain-exec cannot publish a gate decision", "brain-exec", decision},
		{"brain-exec cannot publish an audit record", "brain-exec", audit},
		{"brain-exec cannot widen its consumer", "brain-exec", raw("$JS.API.CONSUMER.CREATE." + names.CallRecordsStream() + "." + contracts.ConsumerBrainExec + "." + names.CallRecordsFilter())},
		{"brain-exec cannot read all inboxes", "brain-exec", sub("_INBOX.>")},
		{"sandbox-exec cannot publish a result", "sandbox-exec", result},
		{"sandbox-exec cannot record a batch for the gate", "sandbox-exec", gateReq},
		{"sandbox-exec cannot publish a gate decision", "sandbox-exec", decision},
		{"sandbox-exec cannot forge a counter", "sandbox-exec", raw("$KV." + names.CountersBucket() + ".counter.forged")},
		{"batcher cannot publish a result", "batcher", result},
		{"gate cannot publish a result", "gate", result},
		{"publisher cannot publish an executor request", "publisher", execReq(contracts.TargetSandbox)},
		{"api cannot publish a batch rejection", "api", pubEvent(names.RejectedSubject(), "forged:rejected", contracts.TypeBatchRejected,
			contracts.BatchRejected{BatchID: contracts.BatchID(forged, 1), RunID: forged, Code: "conflict", Message: "forged", EventID: "forged"})},
		{"api cannot pull the batcher's submissions", "api", raw("$JS.API.CONSUMER.MSG.NEXT." + names.SubmissionsStream() + "." + contracts.ConsumerBatcherSubmit)},
		{"api cannot redirect the batcher's consumer", "api", raw("$JS.API.CONSUMER.CREATE." + names.SubmissionsStream() + "." + contracts.ConsumerBatcherSubmit + "." + names.RejectedSubject())},
		{"api cannot delete the batcher's consumer", "api", raw("$JS.API.CONSUMER.DELETE." + names.SubmissionsStream() + "." + contracts.ConsumerBatcherSubmit)},
		// Its KV watches create consumers of any name on the record streams, but not the
		// services' durables: re-created with another filter, or deleted, they would
		// redirect or stop a service's work.
		{"api cannot redirect the gate's batches consumer", "api", raw("$JS.API.CONSUMER.CREATE." + names.RunRecordsStream() + "." + contracts.ConsumerGateBatches + ".$KV." + names.RunsBucket() + ".spy")},
		{"api cannot delete the gate's batches consumer", "api", raw("$JS.API.CONSUMER.DELETE." + names.RunRecordsStream() + "." + contracts.ConsumerGateBatches)},
		{"api cannot delete the gate's outputs consumer", "api", raw("$JS.API.CONSUMER.DELETE." + names.CallRecordsStream() + "." + contracts.ConsumerGateOutputs)},
		{"api cannot redirect brain-exec's consumer", "api", raw("$JS.API.CONSUMER.CREATE." + names.CallRecordsStream() + "." + contracts.ConsumerBrainExec + ".$KV." + names.CallsBucket() + ".>")},
		{"api cannot delete sandbox-exec's consumer", "api", raw("$JS.API.CONSUMER.DELETE." + names.CallRecordsStream() + "." + contracts.ConsumerSandboxExec)},
		{"api cannot delete the publisher's consumer", "api", raw("$JS.API.CONSUMER.DELETE." + names.CallRecordsStream() + "." + contracts.ConsumerPublisher)},
		{"api cannot delete the gate's sweeper", "api", raw("$JS.API.CONSUMER.DELETE." + contracts.RecordStream(names.BatchesBucket()) + "." + contracts.ConsumerGateSweeper)},
		{"api cannot redirect the gate's run sweeper", "api", raw("$JS.API.CONSUMER.CREATE." + names.RunRecordsStream() + "." + contracts.ConsumerGateRunSweeper + ".$KV." + names.RunsBucket() + ".spy")},
		{"api cannot delete the gate's run sweeper", "api", raw("$JS.API.CONSUMER.DELETE." + names.RunRecordsStream() + "." + contracts.ConsumerGateRunSweeper)},
		{"api cannot consume the results stream beyond the results", "api", raw("$JS.API.CONSUMER.CREATE." + names.ResultsStream() + ".spy.awaken.>")},
		{"api cannot delete the results stream", "api", raw("$JS.API.STREAM.DELETE." + names.ResultsStream())},
		{"api cannot write a batch record", "api", raw("$KV." + names.BatchesBucket() + ".forged.1")},
		{"api cannot write a ticket", "api", raw("$KV." + names.TicketsBucket() + ".perm.forged.1.c1")},
		{"api cannot read the counters", "api", raw("$JS.API.DIRECT.GET.KV_" + names.CountersBucket() + ".$KV." + names.CountersBucket() + ".counter.forged")},
		{"api cannot pull the gate's resumes", "api", raw("$JS.API.CONSUMER.MSG.NEXT." + names.ControlStream() + "." + contracts.ConsumerGateResume)},
		// The api replies into inboxes (_INBOX.>, no allow_responses: a reply permission
		// would override these lists), and nowhere else.
		{"api cannot write the tool descriptors", "api", raw("$KV." + names.ToolsBucket() + "." + contracts.ToolDescriptorsKey(contracts.TargetBrain))},
		{"api cannot publish into a service's inbox", "api", raw(deploy.ServiceInboxPrefix("gate") + ".forged")},
		{"api cannot read the gate's replies", "api", sub(deploy.ServiceInboxPrefix("gate") + ".>")},
		{"api cannot read executor requests", "api", sub(names.CallRecordSubject(">"))},
		{"platform cannot read the api's replies", "platform", sub(deploy.ServiceInboxPrefix(deploy.UserAPI) + ".>")},
		{"platform cannot serve the api's micro endpoints", "platform", sub(httpapi.MicroSubject(contracts.DefaultPrefix, httpapi.EndpointTicketsResolve))},
		// Only brain-exec publishes the descriptors the tool catalog shows.
		{"platform cannot write tool descriptors", "platform", raw("$KV." + names.ToolsBucket() + ".brain")},
		{"api cannot write tool descriptors", "api", raw("$KV." + names.ToolsBucket() + ".brain")},
		{"gate cannot write tool descriptors", "gate", raw("$KV." + names.ToolsBucket() + ".brain")},
		{"sandbox-exec cannot write tool descriptors", "sandbox-exec", raw("$KV." + names.ToolsBucket() + ".brain")},
		{"brain-exec cannot write another target's descriptors", "brain-exec", raw("$KV." + names.ToolsBucket() + ".sandbox")},
		{"platform cannot serve the tool catalog", "platform", sub(names.ToolsListSubject())},
	}
	// The platform and the api stand outside the pipeline: neither may forge any of its
	// messages, so both are refused the same forgeries.
	for _, user := range []string{"platform", "api"} {
		tests = append(tests,
			refusal{user + " cannot publish an executor request", user, execReq(contracts.TargetBrain)},
			refusal{user + " cannot publish a sandbox executor request", user, execReq(contracts.TargetSandbox)},
			refusal{user + " cannot publish a result", user, result},
			refusal{user + " cannot record a batch for the gate", user, gateReq},
			refusal{user + " cannot publish a call output", user, output},
			refusal{user + " cannot publish a gate decision", user, decision},
			refusal{user + " cannot tell a submitter its batch is unchanged", user, unchanged},
		)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := s.connect(t, tc.user)
			subject, err := tc.act(nc)
			if err == nil {
				err = nc.Flush()
			}
			if err != nil && !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("act: %v", err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				v := s.takeViolations()
				if len(v) > 0 {
					if len(v) != 1 || !strings.Contains(v[0], tc.user+":") || !strings.Contains(v[0], subject) {
						t.Fatalf("violations %q, want one of %s on %s", v, tc.user, subject)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s on %s: no permission violation", tc.user, subject)
				}
				if err := nc.Flush(); err != nil { // a round trip paces the poll; no sleeping
					t.Fatal(err)
				}
			}
		})
	}

	// Nothing forged reached a stream, so nothing ran and nothing was published.
	js, err := jetstream.New(s.connect(t, deploy.UserAdmin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	for _, stream := range []string{names.ResultsStream(), names.TicketsStream(), names.AuditStream()} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("awaken.>"))
		if err != nil {
			t.Fatal(err)
		}
		for subj, n := range info.State.Subjects {
			if strings.Contains(subj, forged) {
				t.Errorf("%s holds %d messages on forged subject %s", stream, n, subj)
			}
		}
		if stream == names.TicketsStream() && info.State.Subjects[names.TicketResolvedSubject()] != 0 {
			t.Errorf("a forged gate decision reached %s", stream)
		}
	}
	// No forged call record (a call output is one) reached the calls bucket.
	calls, err := js.Stream(ctx, names.CallRecordsStream())
	if err != nil {
		t.Fatal(err)
	}
	forgedCalls := names.CallRecordSubject(contracts.CallKeysOfRun(forged))
	if info, err := calls.Info(ctx, jetstream.WithSubjectFilter(forgedCalls)); err != nil || len(info.State.Subjects) != 0 {
		t.Errorf("a forged call record reached %s (%v)", names.CallRecordsStream(), err)
	}
	// No forged rejection reached the submissions stream (nothing here is rejected).
	subs, err := js.Stream(ctx, names.SubmissionsStream())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := subs.Info(ctx, jetstream.WithSubjectFilter(names.RejectedSubject())); err != nil || info.State.Subjects[names.RejectedSubject()] != 0 {
		t.Errorf("a forged rejection reached %s (%v)", names.SubmissionsStream(), err)
	}
	if n, err := checker.Counter(ctx, s.client, "forged"); err != nil || n != 0 {
		t.Errorf("forged counter = %d (%v)", n, err)
	}
}

// pubEvent returns an action that publishes a well-formed CloudEvent, as a legitimate
// service would, so a refusal is due to the permission alone.
func pubEvent(subject, id, typ string, payload any) func(nc *nats.Conn) (string, error) {
	return func(nc *nats.Conn) (string, error) {
		ev, err := cloudevent.NewEvent(id, "awaken/forger", typ, payload)
		if err != nil {
			return subject, err
		}
		return subject, nc.PublishMsg(cloudevent.EncodeMsg(subject, ev))
	}
}

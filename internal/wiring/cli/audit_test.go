package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const auditTestConfig = `
tools:
  - { id: echo, capability: replay_safe, recovery_policy: { mode: replay_safe, max_attempts: 3 } }
  - { id: ask_me, builtin: ran }
  - { id: forbidden, builtin: echo }
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask }
    - { pattern: forbidden, behavior: deny }
audit:
  signing_key_file: audit.key
`

// TestAuditVerifyAndExportOverTheGatesTrail: the gate's decisions on a real stack are a
// signed chain per run that `awaken audit verify` passes, whole or per run, and from an
// export; a record edited in the stream with an admin connection makes verify exit 1
// naming it; another key fails every signature.
func TestAuditVerifyAndExportOverTheGatesTrail(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(context.Background(), "audit", "keygen", "--out", filepath.Join(dir, "audit.key"))
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(context.Background(), "audit", "keygen", "--out", filepath.Join(dir, "audit.key")); code == 0 {
		t.Fatal("keygen replaced an existing key file")
	}
	cfgPath := filepath.Join(dir, "awaken.yaml")
	if err := os.WriteFile(cfgPath, []byte(auditTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	key, err := cfg.AuditSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	pubHex := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	if !strings.Contains(out, pubHex) {
		t.Fatalf("keygen printed %q, not the public key %s", out, pubHex)
	}
	if code, keyOut, errOut := runCLI(context.Background(), "audit", "key", "--config", cfgPath); code != 0 || !strings.Contains(keyOut, pubHex) {
		t.Fatalf("audit key: exit %d %q %s", code, keyOut, errOut)
	}

	wait := servicetest.Context(t, time.Minute)
	srv, _ := startStack(t, wait, cfg, contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher, contracts.ServiceAPI)
	c, js := srv.Client, srv.JS
	auditCLI := func(args ...string) (int, string, string) {
		return runCLI(wait, append(args, "--nats-url", srv.URL())...)
	}
	call := servicetest.CallJSON
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-a", 1,
		call("c1", "echo", map[string]string{"text": "hi"}), call("c2", "forbidden", map[string]string{}))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-a", 2, call("c1", "echo", map[string]string{"text": "again"}))); err != nil {
		t.Fatal(err)
	}
	stacktest.Park(t, wait, c, servicetest.Submission("run-c", 1, call("c1", "ask_me", map[string]string{})), "c1")
	// The kill switch's records (the api) are a chain of their own.
	if _, err := c.PauseTool(wait, "forbidden", "audit test", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResumeTool(wait, "forbidden", "ops"); err != nil {
		t.Fatal(err)
	}
	names := cfg.Names()
	pauses, err := auditchain.Read(wait, js, names.AuditStream(), auditchain.Query{Subject: names.ToolPauseAuditSubject()})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := auditchain.Verify(pauses, auditchain.VerifyOptions{PublicKey: key.Public().(ed25519.PublicKey), FromStart: true}); err != nil || sum.Records != 2 {
		t.Fatalf("the pause records: %+v %v", sum, err)
	}
	var runA []auditchain.Record
	natstest.WaitFor(t, 30*time.Second, func() bool {
		runA, err = auditchain.Read(wait, js, names.AuditStream(), auditchain.Query{Subject: names.AuditSubject("run-a")})
		return err == nil && len(runA) == 3
	}, "run-a's three decisions audited")

	for _, args := range [][]string{
		{"audit", "verify", "--run", "run-a", "--public-key", pubHex, "--json=false"},
		{"audit", "verify", "--public-key", pubHex, "--json=false"},
		{"audit", "verify", "--config", cfgPath, "--from-seq", "2", "--json=false"},
	} {
		code, out, errOut := auditCLI(args...)
		if code != 0 || !strings.Contains(out, "audit trail verified") || !strings.Contains(out, "signed by key "+auditchain.KeyID(key.Public().(ed25519.PublicKey))) {
			t.Fatalf("awaken %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if code, out, _ := auditCLI("audit", "verify", "--run", "run-a", "--public-key", pubHex, "--json=false"); !strings.Contains(out, "3 records on 1 subjects") {
		t.Fatalf("verify --run run-a: exit %d %q", code, out)
	}

	export := filepath.Join(dir, "run-a.jsonl")
	if code, _, errOut := auditCLI("audit", "export", "--run", "run-a", "--format", "jsonl", "--out", export, "--public-key", pubHex); code != 0 {
		t.Fatalf("export: exit %d %s", code, errOut)
	}
	if code, out, errOut := runCLI(context.Background(), "audit", "verify", "--file", export, "--public-key", pubHex, "--json=false"); code != 0 || !strings.Contains(out, "3 records") {
		t.Fatalf("verify --file: exit %d %s %s", code, out, errOut)
	}

	_, other, _ := ed25519.GenerateKey(nil)
	otherHex := hex.EncodeToString(other.Public().(ed25519.PublicKey))
	if code, _, errOut := auditCLI("audit", "verify", "--run", "run-a", "--public-key", otherHex); code != 1 || !strings.Contains(errOut, "signature") {
		t.Fatalf("verify with another key: exit %d %s", code, errOut)
	}

	// An admin edits run-a's last decision: deletes it and stores a copy saying deny.
	last := runA[2]
	stream, err := js.Stream(wait, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(wait, last.Seq); err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	for k, v := range last.Header {
		if !strings.HasPrefix(k, "Nats-") {
			h[k] = v
		}
	}
	edited := bytes.Replace(last.Data, []byte(`"allow"`), []byte(`"deny"`), 1)
	if bytes.Equal(edited, last.Data) {
		t.Fatalf("record %s has no allow decision to edit", last.Data)
	}
	ack, err := js.PublishMsg(wait, &nats.Msg{Subject: last.Subject, Header: h, Data: edited})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut = auditCLI("audit", "verify", "--run", "run-a", "--public-key", pubHex)
	if want := "broken at stream seq " + itoa(ack.Sequence); code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "hash") {
		t.Fatalf("verify of the edited trail: exit %d, %q, want %q", code, errOut, want)
	}
	if code, _, errOut := auditCLI("audit", "verify", "--run", "run-never", "--public-key", pubHex); code != 1 || !strings.Contains(errOut, "no audit records of run run-never") {
		t.Fatalf("verify of a run without records: exit %d %s", code, errOut)
	}
	// The untouched run still verifies; the export taken before the edit does too.
	if code, _, errOut := auditCLI("audit", "verify", "--run", "run-c", "--public-key", pubHex); code != 0 {
		t.Fatalf("verify run-c: exit %d %s", code, errOut)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestAMissingSigningKeyRefusesTheStart: a configured key file that is missing or holds
// no key stops the stack before any service starts, with an error naming the entry.
func TestAMissingSigningKeyRefusesTheStart(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.key")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := stacktest.NewServer(t)
	for _, tc := range []struct{ yaml, field string }{
		{"audit: { signing_key_file: " + filepath.Join(dir, "missing.key") + " }", "audit.signing_key_file"},
		{"audit: { signing_key_file: " + garbage + " }", "audit.signing_key_file"},
		{"audit: { signing_key: abcd }", "audit.signing_key"},
	} {
		cfg := parseConfig(t, "tools: [{ id: echo }]\n"+tc.yaml)
		_, err := srv.TryStartStack(context.Background(), app.Options{Config: cfg, Services: []string{contracts.ServiceGate}})
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, config.ErrInvalid) {
			t.Fatalf("%s: start: %v, want a *config.FieldError on %s", tc.yaml, err, tc.field)
		}
	}
	if _, err := config.Parse([]byte("audit: { signing_key: aa, signing_key_file: k }")); err == nil {
		t.Fatal("both signing_key and signing_key_file accepted")
	}
}

// TestDevMakesItsAuditKeyOnce: awaken dev without a configured key makes
// DATA/audit-signing.key (mode 0600) on its first start and reuses it after; a configured
// key is kept.
func TestDevMakesItsAuditKeyOnce(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	keyOf := func() ed25519.PrivateKey {
		cfg, err := config.Parse([]byte("tools: [{ id: echo }]"))
		if err != nil {
			t.Fatal(err)
		}
		if err := devAuditKey(cfg, data); err != nil {
			t.Fatal(err)
		}
		k, err := cfg.AuditSigningKey()
		if err != nil || k == nil {
			t.Fatalf("dev key: %v %v", k, err)
		}
		return k
	}
	first, second := keyOf(), keyOf()
	if !first.Equal(second) {
		t.Fatal("a second dev start made a new key")
	}
	if fi, err := os.Stat(filepath.Join(data, DevAuditKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("dev key file: %v %v", fi, err)
	}
	cfg, err := config.Parse([]byte("tools: [{ id: echo }]\naudit: { signing_key_file: /elsewhere.key }"))
	if err != nil {
		t.Fatal(err)
	}
	if err := devAuditKey(cfg, data); err != nil || cfg.Audit.SigningKeyFile != "/elsewhere.key" {
		t.Fatalf("configured key replaced: %q %v", cfg.Audit.SigningKeyFile, err)
	}
}

// TestAuditVerifyRunNamesATruncatedTail: an admin of the streams deletes the last audit
// records of a finished run, from the one its last batch anchored on (the chain's head the
// publisher read at the batch's finalization) to the end, and the call records they
// audited (so the cross-check has nothing to miss): verify --run names the truncation.
func TestAuditVerifyRunNamesATruncatedTail(t *testing.T) {
	wait := servicetest.Context(t, time.Minute)
	cfgPath, cfg, _, srv := signedAuditStack(t, wait, "")
	var err error
	c, js := srv.Client, srv.JS
	names := cfg.Names()
	verify := func() (int, string, string) {
		return runCLI(wait, "audit", "verify", "--run", "run-t", "--config", cfgPath, "--json=false", "--nats-url", srv.URL())
	}
	var recs []auditchain.Record
	audited := func(n int) {
		natstest.WaitFor(t, 30*time.Second, func() bool {
			recs, err = auditchain.Read(wait, js, names.AuditStream(), auditchain.Query{Subject: names.AuditSubject("run-t")})
			return err == nil && len(recs) == n
		}, "run-t's decisions audited")
	}
	call := servicetest.CallJSON
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-t", 1,
		call("c1", "echo", map[string]string{"text": "one"}), call("c2", "echo", map[string]string{"text": "two"}))); err != nil {
		t.Fatal(err)
	}
	// The second batch starts once the first one's records are in, so its finalization
	// reads a head at or past them.
	audited(2)
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-t", 2, call("c3", "echo", map[string]string{"text": "three"}))); err != nil {
		t.Fatal(err)
	}
	audited(3)
	if code, out, errOut := verify(); code != 0 {
		t.Fatalf("verify of the whole run: exit %d %s%s", code, out, errOut)
	}

	// The anchor the last batch recorded (the run record holds it until a next batch); a
	// record without one (no anchor) leaves the last record to delete.
	runs, err := js.KeyValue(wait, names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := runs.Get(wait, contracts.RunKey("run-t"))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Batch struct {
			AuditHead *struct{ N uint64 } `json:"audit_head"`
		} `json:"batch"`
	}
	if err := json.Unmarshal(e.Value(), &run); err != nil {
		t.Fatal(err)
	}
	from := uint64(len(recs))
	if run.Batch.AuditHead != nil {
		from = run.Batch.AuditHead.N
	}
	cut, purged := cutAuditTail(t, wait, js, names, "run-t", recs, from)
	if purged != len(cut) {
		t.Fatalf("purged %d call records of the calls %v", purged, cut)
	}
	code, out, errOut := verify()
	if want := "finalized with the chain at n " + itoa(from); code != 1 || !strings.Contains(errOut, "truncated") || !strings.Contains(errOut, want) {
		t.Fatalf("verify of the truncated run: exit %d, want %q\n%s%s", code, want, out, errOut)
	}
	t.Logf("verify of the truncated run: exit %d: %s", code, strings.TrimSpace(errOut))
}

// cloudeventDecode is the CloudEvent data of an audit record.
func cloudeventDecode(r auditchain.Record) (json.RawMessage, error) {
	ev, err := cloudevent.DecodeMsg(r.Header, r.Data)
	if err != nil {
		return nil, err
	}
	return ev.Data, nil
}

// TestAuditVerifySaysWhereAPrunedStreamStarts: the audit stream's oldest records removed
// from its head, as retention's max_age does (a purge up to a sequence), leave chains that
// start past n 1: verify passes from the first remaining record and says where the stream
// starts. A time range's export verifies offline; a record deleted inside the stream still
// fails the chains that start past n 1.
func TestAuditVerifySaysWhereAPrunedStreamStarts(t *testing.T) {
	wait := servicetest.Context(t, time.Minute)
	cfgPath, cfg, _, srv := signedAuditStack(t, wait, "")
	dir := filepath.Dir(cfgPath)
	var err error
	c, js := srv.Client, srv.JS
	names := cfg.Names()
	auditCLI := func(args ...string) (int, string, string) {
		return runCLI(wait, append(args, "--config", cfgPath, "--nats-url", srv.URL())...)
	}
	call := servicetest.CallJSON
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-p", 1,
		call("c1", "echo", map[string]string{"text": "one"}), call("c2", "echo", map[string]string{"text": "two"}))); err != nil {
		t.Fatal(err)
	}
	var recs []auditchain.Record
	natstest.WaitFor(t, 30*time.Second, func() bool {
		recs, err = auditchain.Read(wait, js, names.AuditStream(), auditchain.Query{Subject: names.AuditSubject("run-p")})
		return err == nil && len(recs) == 2
	}, "run-p's decisions audited")
	since := recs[0].Time.Add(-time.Second).UTC().Format(time.RFC3339Nano)

	// A time range's export verifies offline.
	export := filepath.Join(dir, "range.jsonl")
	if code, _, errOut := auditCLI("audit", "export", "--since", since, "--format", "jsonl", "--out", export); code != 0 {
		t.Fatalf("export --since: exit %d %s", code, errOut)
	}
	if code, out, errOut := auditCLI("audit", "verify", "--file", export, "--json=false"); code != 0 || !strings.Contains(out, "2 records") {
		t.Fatalf("verify --file of the range: exit %d %s%s", code, out, errOut)
	}

	// Retention removes the oldest record: everything before run-p's second one.
	stream, err := js.Stream(wait, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(wait, jetstream.WithPurgeSequence(recs[1].Seq)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := auditCLI("audit", "verify", "--json=false")
	if want := "verified from stream seq " + itoa(recs[1].Seq); code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "from n 2") {
		t.Fatalf("verify of the pruned stream: exit %d, want %q\n%s%s", code, want, out, errOut)
	}
	t.Logf("verify of the pruned stream: exit %d:\n%s", code, out)

	// A record deleted inside the stream is not retention: chains must start at n 1 again.
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-q", 1, call("c1", "echo", map[string]string{"text": "q"}))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-p", 2, call("c3", "echo", map[string]string{"text": "three"}))); err != nil {
		t.Fatal(err)
	}
	var q []auditchain.Record
	natstest.WaitFor(t, 30*time.Second, func() bool {
		q, err = auditchain.Read(wait, js, names.AuditStream(), auditchain.Query{Subject: names.AuditSubject("run-q")})
		return err == nil && len(q) == 1
	}, "run-q's decision audited")
	natstest.WaitFor(t, 30*time.Second, func() bool {
		info, err := stream.Info(wait)
		return err == nil && info.State.LastSeq > q[0].Seq
	}, "a record stored after run-q's")
	if err := stream.DeleteMsg(wait, q[0].Seq); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := auditCLI("audit", "verify", "--json=false"); code != 1 || !strings.Contains(errOut, "not 1") {
		t.Fatalf("verify after a deletion inside the stream: exit %d\n%s%s", code, out, errOut)
	}
}

// readAuditSubject waits until the audit stream holds at least n records on subject and
// returns them.
func readAuditSubject(t *testing.T, ctx context.Context, js jetstream.JetStream, names contracts.Names, subject string, n int) []auditchain.Record {
	t.Helper()
	var recs []auditchain.Record
	natstest.WaitFor(t, 30*time.Second, func() bool {
		var err error
		recs, err = auditchain.Read(ctx, js, names.AuditStream(), auditchain.Query{Subject: subject})
		return err == nil && len(recs) >= n
	}, subject+" has its records")
	return recs
}

// cutAuditTail deletes from the audit stream the records of recs (run's chain) from n
// from on, and purges the call records of the calls they audited: the tail of a run cut
// off. It returns the calls cut and how many call records it purged.
func cutAuditTail(t *testing.T, ctx context.Context, js jetstream.JetStream, names contracts.Names, run string, recs []auditchain.Record, from uint64) (cut map[string]bool, purged int) {
	t.Helper()
	stream, err := js.Stream(ctx, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	cut = map[string]bool{}
	for _, r := range recs {
		l, err := auditchain.LinkOf(r.Header)
		if err != nil {
			t.Fatal(err)
		}
		if l.N < from {
			continue
		}
		data, err := cloudeventDecode(r)
		if err != nil {
			t.Fatal(err)
		}
		var a contracts.AuditRecord
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatal(err)
		}
		cut[a.CallID] = true
		if err := stream.DeleteMsg(ctx, r.Seq); err != nil {
			t.Fatal(err)
		}
	}
	calls, err := js.KeyValue(ctx, names.CallsBucket())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := calls.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if _, r, _, id, err := contracts.ParseCallKey(k); err == nil && r == run && cut[id] {
			if err := calls.Purge(ctx, k); err != nil {
				t.Fatal(err)
			}
			purged++
		}
	}
	return cut, purged
}

package cli

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestAuditVerifyFromASignedCheckpoint: with retention.audit set, the gate writes a signed
// checkpoint of the chains' heads; a chain whose oldest records were pruned verifies from
// the checkpoint that names its head, whether that head remains or is the record just
// before the first remaining one, and verify says which checkpoint. A signed checkpoint
// that names another head, and an unsigned one, fail verify naming them.
func TestAuditVerifyFromASignedCheckpoint(t *testing.T) {
	wait := servicetest.Context(t, time.Minute)
	cfgPath, cfg, key, srv := signedAuditStack(t, wait, auditRetention)
	c, js := srv.Client, srv.JS
	names := cfg.Names()
	cpSubject := names.AuditCheckpointSubject()
	auditCLI := func(args ...string) (int, string, string) {
		return runCLI(wait, append(args, "--config", cfgPath, "--nats-url", srv.URL())...)
	}
	readSubject := func(subject string, n int) []auditchain.Record {
		t.Helper()
		return readAuditSubject(t, wait, js, names, subject, n)
	}
	// The gate checkpoints the current period as it starts: the stream has a max age.
	gateCP := readSubject(cpSubject, 1)
	if gateCP[0].Header.Get("ce-source") != "awaken/gate" {
		t.Fatalf("the first checkpoint was written by %q, not the gate", gateCP[0].Header.Get("ce-source"))
	}

	call := servicetest.CallJSON
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-c", 1,
		call("c1", "echo", map[string]string{"text": "one"}), call("c2", "echo", map[string]string{"text": "two"}))); err != nil {
		t.Fatal(err)
	}
	recs := readSubject(names.AuditSubject("run-c"), 2)
	// The next period's checkpoint, as the gate writes it, now names run-c's head n 2.
	a := auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), key)
	period := time.Now().UTC().Truncate(auditlog.CheckpointInterval(time.Hour)).Add(auditlog.CheckpointInterval(time.Hour))
	wrote, err := auditlog.WriteCheckpoint(wait, a, cpSubject, period, "awaken/gate")
	if err != nil || !wrote {
		t.Fatalf("checkpoint: wrote %v, %v", wrote, err)
	}
	if wrote, err := auditlog.WriteCheckpoint(wait, a, cpSubject, period, "awaken/gate"); err != nil || wrote {
		t.Fatalf("a second writer of the period: wrote %v, %v; want nothing written", wrote, err)
	}
	cps := readSubject(cpSubject, 2)
	cp := cps[len(cps)-1]
	if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-c", 2, call("c3", "echo", map[string]string{"text": "three"}))); err != nil {
		t.Fatal(err)
	}
	recs = readSubject(names.AuditSubject("run-c"), 3)

	stream, err := js.Stream(wait, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	// Pruned up to run-c's n 2: the checkpoint names a head that remains.
	if err := stream.Purge(wait, jetstream.WithPurgeSequence(recs[1].Seq)); err != nil {
		t.Fatal(err)
	}
	want := "verified from checkpoint at " + cp.Time.UTC().Format(time.RFC3339) + " (seq " + itoa(cp.Seq) + ")"
	code, out, errOut := auditCLI("audit", "verify", "--json=false")
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "from n 2 (checkpoint seq "+itoa(cp.Seq)+" names n 2 hash ") {
		t.Fatalf("verify pruned to n 2: exit %d, want %q\n%s%s", code, want, out, errOut)
	}
	t.Logf("pruned to n 2: exit %d:\n%s", code, out)
	// Pruned up to the checkpoint: its head is the record before run-c's first remaining one.
	if err := stream.Purge(wait, jetstream.WithPurgeSequence(cp.Seq)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = auditCLI("audit", "verify", "--json=false")
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "from n 3 (checkpoint seq "+itoa(cp.Seq)+" names n 2 hash ") {
		t.Fatalf("verify pruned to the checkpoint: exit %d, want %q\n%s%s", code, want, out, errOut)
	}
	t.Logf("pruned to the checkpoint: exit %d:\n%s", code, out)

	// A signed checkpoint naming another head for run-c's n 3 breaks the trail at it.
	forged := auditchain.Checkpoint{Period: period.Add(time.Hour), Heads: map[string]auditchain.CheckpointHead{
		names.AuditSubject("run-c"): {N: 3, Hash: auditchain.ZeroHash, Seq: recs[2].Seq}}}
	ev, err := cloudevent.NewEvent(auditlog.CheckpointID(forged.Period), "awaken/gate", contracts.TypeAuditCheckpoint, forged)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := a.Append(wait, cloudevent.EncodeMsg(cpSubject, ev))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = auditCLI("audit", "verify", "--json=false")
	if wantErr := "broken at stream seq " + itoa(ack.Sequence) + " (checkpoint on " + cpSubject; code != 1 || !strings.Contains(errOut, wantErr) || !strings.Contains(errOut, "checkpoint: it names") {
		t.Fatalf("verify with a checkpoint naming another head: exit %d, want %q\n%s%s", code, wantErr, out, errOut)
	}
	t.Logf("a checkpoint naming another head: exit %d: %s", code, errOut)

	// An unsigned checkpoint is not the gate's.
	unsigned := auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), nil)
	ev, err = cloudevent.NewEvent(auditlog.CheckpointID(forged.Period.Add(time.Hour)), "awaken/gate", contracts.TypeAuditCheckpoint, auditchain.Checkpoint{Period: forged.Period.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if ack, err = unsigned.Append(wait, cloudevent.EncodeMsg(cpSubject, ev)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = auditCLI("audit", "verify", "--json=false")
	if wantErr := "broken at stream seq " + itoa(ack.Sequence) + " (subject " + cpSubject; code != 1 || !strings.Contains(errOut, wantErr) || !strings.Contains(errOut, "signature") {
		t.Fatalf("verify with an unsigned checkpoint: exit %d, want %q\n%s%s", code, wantErr, out, errOut)
	}
	t.Logf("an unsigned checkpoint: exit %d: %s", code, errOut)
}

// auditRetention makes the gate write signed checkpoints.
const auditRetention = "retention:\n  audit: 1h\n"

// signedAuditStack starts the pipeline and the api under auditTestConfig plus extraConfig
// with a new signing key (with retention.audit set, the gate writes signed checkpoints): the
// configuration file's path, the configuration, its signing key and the stack's server.
func signedAuditStack(t *testing.T, wait context.Context, extraConfig string) (string, *config.Config, ed25519.PrivateKey, *stacktest.Server) {
	t.Helper()
	dir := t.TempDir()
	if code, _, errOut := runCLI(context.Background(), "audit", "keygen", "--out", filepath.Join(dir, "audit.key")); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	cfgPath := filepath.Join(dir, "awaken.yaml")
	if err := os.WriteFile(cfgPath, []byte(auditTestConfig+extraConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	key, err := cfg.AuditSigningKey()
	if err != nil || key == nil {
		t.Fatalf("signing key: %v", err)
	}
	srv, _ := startStack(t, wait, cfg, contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher, contracts.ServiceAPI)
	return cfgPath, cfg, key, srv
}

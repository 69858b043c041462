package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestAuditRunAndExportVerifyFromTheirCheckpoint: retention (a purge up to a sequence)
// removes a run's first audit records and the checkpoints before the one naming the record
// before its first remaining one. verify --run then verifies the run from that checkpoint
// (its pruned decisions taken as pruned, not unaudited); an export of the run, and one of a
// range starting after the chain's start, carry the checkpoint first and verify --file
// checks them from it offline. A record or the checkpoint of an export altered fails it, an
// export without its checkpoint line is ErrCheckpointMissing (unless --without-checkpoint),
// the run's tail cut off with its call records is still named by its batches' anchor, and
// its first remaining record deleted inside the stream is not taken for retention.
func TestAuditRunAndExportVerifyFromTheirCheckpoint(t *testing.T) {
	wait := servicetest.Context(t, time.Minute)
	cfgPath, cfg, key, srv := signedAuditStack(t, wait, auditRetention)
	dir := filepath.Dir(cfgPath)
	c, js := srv.Client, srv.JS
	names := cfg.Names()
	cpSubject, runSubject := names.AuditCheckpointSubject(), names.AuditSubject("run-k")
	flags := []string{"--config", cfgPath, "--nats-url", srv.URL()}
	auditCLI := func(args ...string) (int, string, string) {
		if args[1] == "verify" {
			args = append(args, "--json=false")
		}
		return runCLI(wait, append(args, flags...)...)
	}
	// auditErr runs a command for its error, to check its type.
	auditErr := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := dispatch(wait, append(append(args, "--json=false"), flags...), cmdIO{stdout: &out, stderr: &out})
		return out.String(), err
	}
	readSubject := func(subject string, n int) []auditchain.Record {
		t.Helper()
		return readAuditSubject(t, wait, js, names, subject, n)
	}
	readSubject(cpSubject, 1) // the gate's checkpoint of the current period

	call := servicetest.CallJSON
	submit := func(step int64, calls ...string) {
		t.Helper()
		var cs []contracts.ToolCall
		for _, id := range calls {
			cs = append(cs, call(id, "echo", map[string]string{"text": id}))
		}
		if _, err := c.SubmitAndWait(wait, servicetest.Submission("run-k", step, cs...)); err != nil {
			t.Fatal(err)
		}
	}
	submit(1, "c1", "c2")
	readSubject(runSubject, 2)
	// The next period's checkpoint, as the gate writes it, names run-k's head n 2.
	a := auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), key)
	period := time.Now().UTC().Truncate(auditlog.CheckpointInterval(time.Hour)).Add(auditlog.CheckpointInterval(time.Hour))
	if wrote, err := auditlog.WriteCheckpoint(wait, a, cpSubject, period, "awaken/gate"); err != nil || !wrote {
		t.Fatalf("checkpoint: wrote %v, %v", wrote, err)
	}
	cps := readSubject(cpSubject, 2)
	cp := cps[len(cps)-1]
	// Each batch starts once the one before is audited, so its anchor is at or past it.
	submit(2, "c3", "c4")
	readSubject(runSubject, 4)
	submit(3, "c5", "c6")
	recs := readSubject(runSubject, 6)

	// Retention removes everything before the checkpoint: run-k's n 1 and 2, the gate's
	// first checkpoint.
	stream, err := js.Stream(wait, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(wait, jetstream.WithPurgeSequence(cp.Seq)); err != nil {
		t.Fatal(err)
	}
	fromCP := "verified from checkpoint at " + cp.Time.UTC().Format(time.RFC3339) + " (seq " + itoa(cp.Seq) + ")"
	names2 := "from n 3 (checkpoint seq " + itoa(cp.Seq) + " names n 2 hash "

	code, out, errOut := auditCLI("audit", "verify", "--run", "run-k")
	if code != 0 || !strings.Contains(out, fromCP) || !strings.Contains(out, names2) || !strings.Contains(out, "(2, pruned with the records before it)") {
		t.Fatalf("verify --run of the pruned run: exit %d, want %q and %q\n%s%s", code, fromCP, names2, out, errOut)
	}
	t.Logf("verify --run of the pruned run: exit %d:\n%s", code, out)

	// The run's export carries the checkpoint first and verifies from it offline.
	runExport := filepath.Join(dir, "run.jsonl")
	if code, _, errOut := auditCLI("audit", "export", "--run", "run-k", "--out", runExport); code != 0 || !strings.Contains(errOut, "starts from the checkpoint") {
		t.Fatalf("export --run: exit %d %s", code, errOut)
	}
	lines := exportLines(t, runExport)
	if len(lines) != 6 || !strings.Contains(lines[1], `"checkpoint":true`) || !strings.Contains(lines[1], `"seq":`+itoa(cp.Seq)+",") {
		t.Fatalf("the run's export: want its header, the checkpoint and 4 records:\n%s", strings.Join(lines, "\n"))
	}
	code, out, errOut = auditCLI("audit", "verify", "--file", runExport)
	if code != 0 || !strings.Contains(out, fromCP) || !strings.Contains(out, names2) {
		t.Fatalf("verify --file of the run's export: exit %d, want %q and %q\n%s%s", code, fromCP, names2, out, errOut)
	}
	t.Logf("verify --file of the run's export: exit %d:\n%s", code, out)

	// A range that starts after the chain's start (n 4) is extended back to the checkpoint.
	for _, selection := range [][]string{
		{"--from-seq", itoa(recs[3].Seq)},
		{"--since", recs[3].Time.UTC().Format(time.RFC3339Nano)},
	} {
		rangeExport := filepath.Join(dir, "range.jsonl")
		code, _, errOut := auditCLI(append([]string{"audit", "export", "--out", rangeExport}, selection...)...)
		if code != 0 || !strings.Contains(errOut, "starts from the checkpoint") || !strings.Contains(errOut, "records from its cut") {
			t.Fatalf("export %s: exit %d %s", selection, code, errOut)
		}
		code, out, errOut = auditCLI("audit", "verify", "--file", rangeExport)
		if code != 0 || !strings.Contains(out, fromCP) || !strings.Contains(out, names2) {
			t.Fatalf("verify --file of the export %s: exit %d, want %q and %q\n%s%s", selection, code, fromCP, names2, out, errOut)
		}
	}

	// An altered record, an altered checkpoint, a missing checkpoint.
	edited := func(name string, edit func([]string) []string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(edit(exportLines(t, runExport)), "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// alter replaces from with to in the stored data of an export line.
	alter := func(line string, from, to string) string {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		data, err := base64.StdEncoding.DecodeString(e["data_base64"].(string))
		if err != nil || !bytes.Contains(data, []byte(from)) {
			t.Fatalf("the line's data %s has no %s (%v)", data, from, err)
		}
		e["data_base64"] = bytes.Replace(data, []byte(from), []byte(to), 1)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tampered := edited("tampered.jsonl", func(l []string) []string {
		l[len(l)-1] = alter(l[len(l)-1], `"c6"`, `"c7"`)
		return l
	})
	if msg, err := auditErr("audit", "verify", "--file", tampered); !errors.As(err, new(*auditchain.BreakError)) || !strings.Contains(err.Error(), "hash") {
		t.Fatalf("verify of an export with an altered record: %v\n%s", err, msg)
	}
	head, err := auditchain.LinkOf(recs[1].Header)
	if err != nil {
		t.Fatal(err)
	}
	forged := edited("forged.jsonl", func(l []string) []string {
		l[1] = alter(l[1], head.Hash, auditchain.ZeroHash)
		return l
	})
	if msg, err := auditErr("audit", "verify", "--file", forged); !errors.Is(err, auditchain.ErrCheckpointInvalid) {
		t.Fatalf("verify of an export with an altered checkpoint: %v, want ErrCheckpointInvalid\n%s", err, msg)
	}
	noCheckpoint := edited("nocheckpoint.jsonl", func(l []string) []string { return append(l[:1], l[2:]...) })
	msg, err := auditErr("audit", "verify", "--file", noCheckpoint)
	if !errors.Is(err, auditchain.ErrCheckpointMissing) || !strings.Contains(err.Error(), runSubject+" from n 3") {
		t.Fatalf("verify of an export without its checkpoint: %v, want ErrCheckpointMissing\n%s", err, msg)
	}
	t.Logf("an export without its checkpoint: %v", err)
	if code, _, errOut := auditCLI("audit", "verify", "--file", noCheckpoint); code != 1 || !strings.Contains(errOut, "no checkpoint vouches for a cut chain") {
		t.Fatalf("verify of an export without its checkpoint: exit %d %s", code, errOut)
	}
	if code, out, errOut := auditCLI("audit", "verify", "--file", noCheckpoint, "--without-checkpoint"); code != 0 || !strings.Contains(out, "from n 3 (no checkpoint names its head)") {
		t.Fatalf("verify --without-checkpoint of an export without its checkpoint: exit %d\n%s%s", code, out, errOut)
	}

	// The tail cut off from the last batch's anchor on, with the call records it audited.
	var anchor *contracts.AuditHead
	batches, err := js.KeyValue(wait, names.BatchesBucket())
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		e, err := batches.Get(wait, contracts.BatchKey("run-k", 3))
		var b contracts.BatchRecord
		if err == nil && json.Unmarshal(e.Value(), &b) == nil {
			anchor = b.AuditHead
		}
		return anchor != nil
	}, "the last batch archived with its anchor")
	if anchor.N < 4 {
		t.Fatalf("the last batch anchored n %d, before the batch before it was audited", anchor.N)
	}
	cutAuditTail(t, wait, js, names, "run-k", recs, anchor.N)
	code, out, errOut = auditCLI("audit", "verify", "--run", "run-k")
	if code != 1 || !strings.Contains(errOut, "truncated") {
		t.Fatalf("verify --run of the pruned run with its tail cut: exit %d, want it named truncated\n%s%s", code, out, errOut)
	}
	t.Logf("the tail cut: exit %d: %s", code, strings.TrimSpace(errOut))

	// The run's first remaining record deleted inside the stream is not retention: the
	// chain must start at n 1 again.
	if err := stream.DeleteMsg(wait, recs[2].Seq); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := auditCLI("audit", "verify", "--run", "run-k"); code != 1 || !strings.Contains(errOut, "not 1") {
		t.Fatalf("verify --run after its first remaining record was deleted inside the stream: exit %d\n%s%s", code, out, errOut)
	}
}

// exportLines is the lines of an export file.
func exportLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

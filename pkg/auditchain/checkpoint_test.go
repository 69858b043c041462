package auditchain_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/auditchain"
)

// TestAnchorLinksPrunedChainsToTheirCheckpoint: a chain pruned from its head is anchored by
// a checkpoint naming the record before its first remaining one or one of its records; a
// checkpoint naming another hash, or a head past the chain's end (its tail removed), breaks
// at the checkpoint; a chain no checkpoint reaches is left unanchored.
func TestAnchorLinksPrunedChainsToTheirCheckpoint(t *testing.T) {
	const run, other, cpSubject = "awaken.audit.r", "awaken.audit.o", "awaken.audit.checkpoint.heads"
	recs := chain(t, run, 5, nil)
	head := func(n int) auditchain.CheckpointHead {
		l, err := auditchain.LinkOf(recs[n-1].Header)
		if err != nil {
			t.Fatal(err)
		}
		return auditchain.CheckpointHead{N: l.N, Hash: l.Hash, Seq: recs[n-1].Seq}
	}
	checkpoint := func(seq uint64, heads map[string]auditchain.CheckpointHead) auditchain.Record {
		data, err := json.Marshal(auditchain.Checkpoint{Heads: heads})
		if err != nil {
			t.Fatal(err)
		}
		r := chain(t, cpSubject, 1, nil)[0]
		r.Seq, r.Data = seq, data
		return r
	}
	o := chain(t, other, 3, nil)
	for i := range o {
		o[i].Seq += 100
	}
	tests := []struct {
		name     string
		from     int // run's first remaining n
		heads    map[string]auditchain.CheckpointHead
		anchored uint64 // the head n the checkpoint names for run; 0: not anchored
		broken   bool
	}{
		{"the head just before", 3, map[string]auditchain.CheckpointHead{run: head(2)}, 2, false},
		{"a remaining head", 2, map[string]auditchain.CheckpointHead{run: head(4)}, 4, false},
		{"too old to reach", 4, map[string]auditchain.CheckpointHead{run: head(2)}, 0, false},
		{"another hash just before", 3, map[string]auditchain.CheckpointHead{run: {N: 2, Hash: head(3).Hash}}, 0, true},
		{"another hash remaining", 2, map[string]auditchain.CheckpointHead{run: {N: 4, Hash: head(3).Hash}}, 0, true},
		{"past the chain's end", 2, map[string]auditchain.CheckpointHead{run: {N: 7, Hash: head(5).Hash}}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint(50, tc.heads)
			in := append(append(append([]auditchain.Record{}, recs[tc.from-1:]...), o[1:]...), cp)
			refs, err := auditchain.Anchor(in, cpSubject)
			if tc.broken {
				be := breakOf(t, err)
				if be.Seq != 50 || be.Reason != auditchain.BreakCheckpoint {
					t.Fatalf("break %+v, want the checkpoint at seq 50", be)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref, ok := refs[run]; ok != (tc.anchored > 0) || ref.N != tc.anchored || (ok && ref.Seq != 50) {
				t.Fatalf("run anchored %v at %+v, want n %d", ok, ref, tc.anchored)
			}
			if _, ok := refs[other]; ok {
				t.Fatalf("%s anchored though no checkpoint names it", other)
			}
		})
	}
}

// sealedCheckpoint is a checkpoint record naming heads, sealed as record n of the checkpoint
// chain (with a made-up prev) by key, at stream sequence seq.
func sealedCheckpoint(t *testing.T, subject string, n, seq uint64, heads map[string]auditchain.CheckpointHead, key ed25519.PrivateKey) auditchain.Record {
	t.Helper()
	data, err := json.Marshal(auditchain.Checkpoint{Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: subject, Header: nats.Header{"ce-id": {"audit-checkpoint.1"}, "ce-type": {"io.awaken.audit.checkpoint.v1"},
		"ce-source": {"awaken/gate"}, "ce-time": {"2026-12-02T20:00:00Z"}}, Data: data}
	auditchain.Seal(m, n, strings.Repeat("ab", 32), key)
	return auditchain.Record{Seq: seq, Subject: subject, Header: m.Header, Data: m.Data}
}

// TestAnExportVerifiesFromTheCheckpointItCarries: an export of a chain cut before its first
// record carries the checkpoint naming the record before it, and verifies from it offline;
// the same export without that line is ErrCheckpointMissing, with a checkpoint altered or
// signed by another key ErrCheckpointInvalid, and a checkpoint line after the records is
// refused.
func TestAnExportVerifiesFromTheCheckpointItCarries(t *testing.T) {
	const run, cpSubject = "awaken.audit.r", "awaken.audit.checkpoint.heads"
	key, _, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	recs := chain(t, run, 5, key)
	for i := range recs {
		recs[i].Seq += 10
	}
	l2, err := auditchain.LinkOf(recs[1].Header)
	if err != nil {
		t.Fatal(err)
	}
	cp := sealedCheckpoint(t, cpSubject, 4, 5, map[string]auditchain.CheckpointHead{run: {N: 2, Hash: l2.Hash, Seq: recs[1].Seq}}, key)

	verify := func(t *testing.T, carried []auditchain.Record, records []auditchain.Record) (map[string]auditchain.CheckpointRef, error) {
		t.Helper()
		var buf bytes.Buffer
		if err := auditchain.ExportWith(&buf, records, auditchain.ExportOptions{PublicKey: pub, CheckpointSubject: cpSubject, Checkpoints: carried}); err != nil {
			t.Fatal(err)
		}
		f, err := auditchain.ReadExportFile(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if f.CheckpointSubject != cpSubject || len(f.Checkpoints) != len(carried) || len(f.Records) != len(records) || !f.PublicKey.Equal(pub) {
			t.Fatalf("read back %+v", f)
		}
		if _, err := auditchain.Verify(f.Records, auditchain.VerifyOptions{PublicKey: pub}); err != nil {
			t.Fatal(err)
		}
		return auditchain.AnchorCut(f.Records, f.Checkpoints, f.CheckpointSubject, pub)
	}
	t.Run("from its checkpoint", func(t *testing.T) {
		refs, err := verify(t, []auditchain.Record{cp}, recs[2:])
		if err != nil {
			t.Fatal(err)
		}
		if ref := refs[run]; ref.Seq != 5 || ref.N != 2 || ref.Hash != l2.Hash {
			t.Fatalf("anchored at %+v, want the checkpoint at seq 5 naming n 2", ref)
		}
	})
	t.Run("a whole chain needs none", func(t *testing.T) {
		if _, err := verify(t, nil, recs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the checkpoint line removed", func(t *testing.T) {
		_, err := verify(t, nil, recs[2:])
		var ue *auditchain.UnanchoredError
		if !errors.Is(err, auditchain.ErrCheckpointMissing) || !errors.As(err, &ue) || ue.Chains[run] != 3 {
			t.Fatalf("err %v, want ErrCheckpointMissing naming %s from n 3", err, run)
		}
	})
	t.Run("a checkpoint older than the export", func(t *testing.T) {
		// It names n 2 and the export starts at n 4: it links nothing, which is a missing
		// checkpoint, not a forged one.
		if _, err := verify(t, []auditchain.Record{cp}, recs[3:]); !errors.Is(err, auditchain.ErrCheckpointMissing) {
			t.Fatalf("err %v, want ErrCheckpointMissing", err)
		}
	})
	altered := cp
	altered.Data = bytes.Replace(cp.Data, []byte(l2.Hash), []byte(auditchain.ZeroHash), 1)
	other, _, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for name, forged := range map[string]auditchain.Record{
		"altered":          altered,
		"another key":      sealedCheckpoint(t, cpSubject, 4, 5, map[string]auditchain.CheckpointHead{run: {N: 2, Hash: l2.Hash}}, other),
		"another head":     sealedCheckpoint(t, cpSubject, 4, 5, map[string]auditchain.CheckpointHead{run: {N: 2, Hash: auditchain.ZeroHash}}, key),
		"not a checkpoint": recs[0],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := verify(t, []auditchain.Record{forged}, recs[2:])
			if be := breakOf(t, err); !errors.Is(err, auditchain.ErrCheckpointInvalid) || be.Reason != auditchain.BreakCheckpoint {
				t.Fatalf("err %v, want ErrCheckpointInvalid", err)
			}
		})
	}
	t.Run("a checkpoint line after the records", func(t *testing.T) {
		var buf bytes.Buffer
		if err := auditchain.ExportWith(&buf, recs[2:], auditchain.ExportOptions{CheckpointSubject: cpSubject}); err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(map[string]any{"checkpoint": true, "seq": cp.Seq, "subject": cp.Subject, "headers": cp.Header, "data_base64": cp.Data})
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(line, '\n'))
		if _, err := auditchain.ReadExportFile(&buf); err == nil || !strings.Contains(err.Error(), "after the records") {
			t.Fatalf("read: %v, want the late checkpoint line refused", err)
		}
	})
	t.Run("the first format", func(t *testing.T) {
		in := `{"format":"awaken-audit-export-v1","canonical":"awaken-audit-v1"}` + "\n"
		f, err := auditchain.ReadExportFile(strings.NewReader(in))
		if err != nil || f.Format != "awaken-audit-export-v1" || f.CheckpointSubject != "" {
			t.Fatalf("read a v1 export: %+v, %v", f, err)
		}
	})
}

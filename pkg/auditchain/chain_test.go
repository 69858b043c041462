package auditchain_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/auditchain"
)

// chain seals n records on subject as an appender would, numbering stream sequences from 1.
func chain(t *testing.T, subject string, n int, key ed25519.PrivateKey) []auditchain.Record {
	t.Helper()
	prev := auditchain.ZeroHash
	var out []auditchain.Record
	for i := range n {
		m := &nats.Msg{Subject: subject, Header: nats.Header{"ce-id": {fmt.Sprintf("id-%d", i)}, "ce-type": {"io.awaken.audit.permission_decided.v1"},
			"ce-source": {"awaken/gate"}, "ce-time": {"2026-12-02T20:00:00Z"}}, Data: []byte(fmt.Sprintf(`{"decision":"allow","i":%d}`, i))}
		l := auditchain.Seal(m, uint64(i+1), prev, key)
		prev = l.Hash
		out = append(out, auditchain.Record{Seq: uint64(i + 1), Subject: subject, Header: m.Header, Data: m.Data})
	}
	return out
}

func breakOf(t *testing.T, err error) *auditchain.BreakError {
	t.Helper()
	var be *auditchain.BreakError
	if !errors.As(err, &be) {
		t.Fatalf("verify: %v, want a *BreakError", err)
	}
	return be
}

func TestVerifyNamesWhatBroke(t *testing.T) {
	key, _, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	opts := auditchain.VerifyOptions{PublicKey: pub, FromStart: true}
	if sum, err := auditchain.Verify(chain(t, "awaken.audit.r", 3, key), opts); err != nil || sum.Last["awaken.audit.r"].N != 3 {
		t.Fatalf("untouched: %+v %v", sum, err)
	}
	tests := []struct {
		name   string
		tamper func([]auditchain.Record) []auditchain.Record
		seq    uint64
		reason auditchain.Reason
	}{
		{"data edited", func(r []auditchain.Record) []auditchain.Record {
			r[1].Data = bytes.Replace(r[1].Data, []byte("allow"), []byte("deny!"), 1)
			return r
		}, 2, auditchain.BreakHash},
		{"ce-type edited", func(r []auditchain.Record) []auditchain.Record {
			r[2].Header.Set("ce-type", "io.awaken.other")
			return r
		}, 3, auditchain.BreakHash},
		{"middle deleted", func(r []auditchain.Record) []auditchain.Record { return append(r[:1], r[2:]...) }, 3, auditchain.BreakGap},
		{"first deleted", func(r []auditchain.Record) []auditchain.Record { return r[1:] }, 2, auditchain.BreakGap},
		{"reordered", func(r []auditchain.Record) []auditchain.Record {
			r[1].Seq, r[2].Seq = r[2].Seq, r[1].Seq
			return r
		}, 2, auditchain.BreakGap},
		{"signature stripped", func(r []auditchain.Record) []auditchain.Record {
			r[0].Header.Del(auditchain.HeaderSig)
			return r
		}, 1, auditchain.BreakSignature},
		{"chain headers stripped", func(r []auditchain.Record) []auditchain.Record {
			r[1].Header.Del(auditchain.HeaderN)
			return r
		}, 2, auditchain.BreakUnchained},
		{"prev rewritten and re-hashed without the key", func(r []auditchain.Record) []auditchain.Record {
			m := &nats.Msg{Subject: r[1].Subject, Header: r[1].Header, Data: r[1].Data}
			auditchain.Seal(m, 2, auditchain.ZeroHash, nil)
			return r
		}, 2, auditchain.BreakSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auditchain.Verify(tc.tamper(chain(t, "awaken.audit.r", 3, key)), opts)
			if be := breakOf(t, err); be.Seq != tc.seq || be.Reason != tc.reason {
				t.Fatalf("broke at seq %d (%s), want seq %d (%s): %v", be.Seq, be.Reason, tc.seq, tc.reason, err)
			}
		})
	}
	// Without the key the hash chain is still checked: a record re-sealed (consistently
	// hashed) on another prev breaks at its own prev link.
	recs := chain(t, "awaken.audit.r", 3, key)
	m := &nats.Msg{Subject: recs[1].Subject, Header: recs[1].Header, Data: recs[1].Data}
	auditchain.Seal(m, 2, auditchain.ZeroHash, nil)
	_, err = auditchain.Verify(recs, auditchain.VerifyOptions{FromStart: true})
	if be := breakOf(t, err); be.Seq != 2 || be.Reason != auditchain.BreakPrev {
		t.Fatalf("unsigned verify broke at seq %d (%s), want 2 (prev)", be.Seq, be.Reason)
	}
	// A range anchors at its first record of each subject.
	if _, err := auditchain.Verify(chain(t, "awaken.audit.r", 3, key)[1:], auditchain.VerifyOptions{PublicKey: pub}); err != nil {
		t.Fatalf("range: %v", err)
	}
}

func TestParsePrivateKeyForms(t *testing.T) {
	key, seed, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, form := range map[string]string{
		"hex seed":    seed + "\n",
		"hex key":     hex.EncodeToString(key),
		"PKCS #8 PEM": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"padded seed": "  " + seed + "  \n",
	} {
		got, err := auditchain.ParsePrivateKey([]byte(form))
		if err != nil || !got.Equal(key) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	flipped := append([]byte(nil), key...)
	flipped[len(flipped)-1] ^= 0xff
	bad := hex.EncodeToString(flipped)
	for name, form := range map[string]string{"empty": "", "short": "abcd", "not hex": "zz", "mismatched public half": bad} {
		if _, err := auditchain.ParsePrivateKey([]byte(form)); !errors.Is(err, auditchain.ErrBadKey) {
			t.Fatalf("%s: %v, want ErrBadKey", name, err)
		}
	}
}

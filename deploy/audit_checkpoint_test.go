package deploy_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestSecure_gateWritesTheAuditCheckpoint: with retention.audit set, the gate, as its own
// least-privilege user, reads the audit stream's chains and writes the signed checkpoint
// of their heads; the grants of deploy/nats/auth.conf suffice and verify passes over it.
func TestSecure_gateWritesTheAuditCheckpoint(t *testing.T) {
	s := startSecureServer(t)
	k, seed, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Audit.SigningKey = seed
	s.cfg.Retention.Audit = "1h"
	ctx := ctxFor(t, 2*time.Minute)
	js, log := s.setUp(t, ctx)
	s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceGate}})
	names := s.cfg.Names()
	var recs []auditchain.Record
	natstest.WaitFor(t, time.Minute, func() bool {
		recs, err = auditchain.Read(ctx, js, names.AuditStream(), auditchain.Query{Subject: names.AuditCheckpointSubject()})
		return err == nil && len(recs) > 0
	}, "the gate's checkpoint stored")
	pub := k.Public().(ed25519.PublicKey)
	if _, err := auditchain.Verify(recs, auditchain.VerifyOptions{PublicKey: pub, FromStart: true}); err != nil {
		t.Fatalf("the gate's checkpoint: %v", err)
	}
	if code, out := auditVerify(ctx, s, pub); code != 0 {
		t.Fatalf("verify: exit %d: %s", code, out)
	}
	if v := s.takeViolations(); len(v) > 0 {
		t.Fatalf("permission violations: %v", v)
	}
}

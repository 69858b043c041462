package auditlog_test

import (
	"fmt"
	"testing"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/pkg/auditchain"
)

// BenchmarkAuditRecord measures what the chain adds to one audit record against the plain
// publish it replaced: seal (hash, signature) and a compare-and-swap publish with the head
// cached, and with the head unknown (one refused publish and one leader read first). Run
// with `go test -run '^$' -bench AuditRecord -benchtime 2000x ./internal/auditlog/`.
func BenchmarkAuditRecord(b *testing.B) {
	for _, mode := range []string{"plain publish", "chained, head cached", "chained, head unknown"} {
		b.Run(mode, func(b *testing.B) {
			tr := newTrail(b)
			subject := names.AuditSubject("bench")
			a := auditlog.New(tr.js, names.AuditStream(), auditlog.SubjectPrefix(names), tr.key)
			b.ResetTimer()
			for i := range b.N {
				m := record(b, subject, fmt.Sprintf("rec-%d", i))
				var err error
				switch mode {
				case "plain publish":
					_, err = tr.js.PublishMsg(tr.ctx, m)
				case "chained, head cached":
					_, err = a.Append(tr.ctx, m)
				default:
					_, err = auditlog.New(tr.js, names.AuditStream(), auditlog.SubjectPrefix(names), tr.key).Append(tr.ctx, m)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSeal(b *testing.B) {
	key, _, _ := auditchain.GenerateKey()
	m := record(b, names.AuditSubject("bench"), "rec")
	for range b.N {
		auditchain.Seal(m, 7, auditchain.ZeroHash, key)
	}
}

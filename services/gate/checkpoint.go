package gate

import (
	"context"
	"time"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// checkpointRecheck is how long the checkpointer waits before looking again at an audit
// stream without a max age (nothing is pruned by age, so no checkpoint is needed) or after
// a failed checkpoint.
const checkpointRecheck = time.Hour

// checkpointLoop writes the audit trail's checkpoints (docs/security.md, the audit trail)
// off every call's path: once per [auditlog.CheckpointInterval] of the audit stream's max
// age, read again each time so an operator's change of retention.audit is followed. Every
// replica runs it; the checkpoint of a period has one id, so it is stored once. It returns
// when ctx ends.
//
// Each partition has its audit stream, and each its checkpoints (on the partition's
// checkpoint subject, covering that stream's chains).
func (s *Service) checkpointLoop(ctx context.Context) {
	parts := s.env.Names.EachPartition()
	// The environment's appenders, one per partition in the order of parts: the ones its
	// publisher chains the audit records through.
	appenders := s.env.AuditChains()
	for {
		wait := checkpointRecheck
		for k, pn := range parts {
			if interval, err := s.writeCheckpoint(ctx, pn, appenders[k]); err != nil {
				s.log.Warn().Err(err).Str("stream", pn.AuditStream()).Msg("audit checkpoint not written; retrying later")
			} else if interval > 0 {
				now := s.env.Now()
				wait = min(wait, now.Truncate(interval).Add(interval).Sub(now))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// writeCheckpoint writes the checkpoint of the current period if the audit stream has a
// max age, and returns the interval (0: the stream keeps its records, no checkpoint).
func (s *Service) writeCheckpoint(ctx context.Context, n contracts.Names, a *auditlog.Appender) (time.Duration, error) {
	st, err := s.env.Stream(ctx, n.AuditStream())
	if err != nil {
		return 0, err
	}
	interval := auditlog.CheckpointInterval(st.CachedInfo().Config.MaxAge)
	if interval == 0 {
		return 0, nil
	}
	period := s.env.Now().Truncate(interval)
	wrote, err := auditlog.WriteCheckpoint(ctx, a, n.AuditCheckpointSubject(), period, "awaken/"+ServiceName)
	if err != nil {
		return 0, err
	}
	if wrote {
		s.log.Debug().Time("period", period).Msg("audit checkpoint written")
	}
	return interval, nil
}

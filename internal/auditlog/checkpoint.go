package auditlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// CheckpointInterval is how often checkpoints are written for an audit stream whose
// records expire after maxAge: four per retention, so when retention removes a chain's
// oldest records a checkpoint written before the cut still names a head among those that
// remain, or the one just before them. Zero (no max age: nothing is pruned by age) means
// none; never less than a minute.
func CheckpointInterval(maxAge time.Duration) time.Duration {
	if maxAge <= 0 {
		return 0
	}
	return max(maxAge/4, time.Minute)
}

// CheckpointID is the CloudEvent id (and Nats-Msg-Id) of the checkpoint of the period
// starting at period: the same for every writer of that period, so the stream stores it once.
func CheckpointID(period time.Time) string {
	return "audit-checkpoint." + strconv.FormatInt(period.Unix(), 10)
}

// WriteCheckpoint appends to subject, through a, the checkpoint of the period starting at
// period: the head of every chain of the audit stream except subject's own. It writes
// nothing (false) when the last checkpoint stored is of this period or a later one, so
// replicas that each write once per period store one. source is the writer's CloudEvent
// source; replicas must share it for the stream's deduplication to recognise the record.
func WriteCheckpoint(ctx context.Context, a *Appender, subject string, period time.Time, source string) (bool, error) {
	last, err := state.ReadLastFromLeader(ctx, a.js.Conn(), a.stream, subject)
	switch {
	case err == nil:
		var prev auditchain.Checkpoint
		if json.Unmarshal(last.Data, &prev) == nil && !prev.Period.Before(period) {
			return false, nil
		}
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return false, fmt.Errorf("auditlog: checkpoint: read the last one: %w", err)
	}
	st, err := a.js.Stream(ctx, a.stream)
	if err != nil {
		return false, fmt.Errorf("auditlog: checkpoint: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(a.prefix+">"))
	if err != nil {
		return false, fmt.Errorf("auditlog: checkpoint: list the chains: %w", err)
	}
	cp := auditchain.Checkpoint{Period: period.UTC(), CutSeq: info.State.LastSeq, Heads: make(map[string]auditchain.CheckpointHead, len(info.State.Subjects))}
	for s := range info.State.Subjects {
		if s == subject {
			continue
		}
		m, err := state.ReadLastFromLeader(ctx, a.js.Conn(), a.stream, s)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			continue // removed since the listing
		case err != nil:
			return false, fmt.Errorf("auditlog: checkpoint: read the head of %s: %w", s, err)
		}
		l, err := auditchain.LinkOf(m.Header)
		if err != nil {
			continue // unchained: verification names it, a checkpoint cannot vouch for it
		}
		cp.Heads[s] = auditchain.CheckpointHead{N: l.N, Hash: l.Hash, Seq: m.Sequence}
	}
	ev, err := cloudevent.NewEvent(CheckpointID(period), source, contracts.TypeAuditCheckpoint, cp)
	if err != nil {
		return false, fmt.Errorf("auditlog: checkpoint: %w", err)
	}
	ack, err := a.Append(ctx, cloudevent.EncodeMsg(subject, ev))
	if err != nil {
		return false, fmt.Errorf("auditlog: checkpoint: %w", err)
	}
	return !ack.Duplicate, nil
}

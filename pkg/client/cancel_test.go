package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// publishStored publishes ev on subject through JetStream (stored by the stream).
func (e *testEnv) publishStored(subject, id, typ string, payload any) {
	e.t.Helper()
	ev, err := cloudevent.NewEvent(id, "awaken/gate", typ, payload)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.js.PublishMsg(ctx, cloudevent.EncodeMsg(subject, ev)); err != nil {
		e.t.Fatal(err)
	}
}

// TestCancelRunReadsAnAnnouncementItsSubscriptionMissed: no gate answers here, so the
// subscription hears nothing; the run's announcement is in the events stream (published
// before, behind another event of the run), and CancelRun finds it there. A run never
// announced ends the wait with ErrCancelPending, the cancel command stored.
func TestCancelRunReadsAnAnnouncementItsSubscriptionMissed(t *testing.T) {
	e := newTestEnv(t)
	endedAt := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	e.publishStored(e.names.EventsSubject("run-gone"), "tool-batch:run-gone:1:c1:event:tool_call", contracts.TypeAgentEvent,
		contracts.AgentEvent{Tier: "fact", BatchID: "tool-batch:run-gone:1", Event: contracts.AgentFact{Type: contracts.EventToolCall, ID: "c1", Name: "echo"}})
	e.publishStored(e.names.EventsSubject("run-gone"), "run-gone:ended", contracts.TypeRunEnded,
		contracts.RunEndedEvent{RunID: "run-gone", Reason: contracts.RunEndStateConflict, Keys: []string{"owner"}, EndedAt: endedAt})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ended, err := e.c.CancelRun(ctx, "run-gone", "stop")
	if err != nil || ended.Reason != contracts.RunEndStateConflict || !ended.EndedAt.Equal(endedAt) || len(ended.Keys) != 1 {
		t.Fatalf("CancelRun of an announced run: %+v %v", ended, err)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelShort()
	if _, err := e.c.CancelRun(short, "run-silent", "stop"); !errors.Is(err, ErrCancelPending) {
		t.Fatalf("CancelRun of a run nobody ends: %v, want ErrCancelPending", err)
	}
	info, err := e.js.Stream(ctx, e.names.ControlStream())
	if err != nil {
		t.Fatal(err)
	}
	if st := info.CachedInfo().State; st.Msgs != 2 {
		t.Errorf("control stream holds %d cancel commands, want 2", st.Msgs)
	}
}

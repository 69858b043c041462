package execcore_test

import (
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPausedToolIsBlockedBeforeItsBody: a call the gate
// allowed before its tool was paused, still queued when the pause lands, ends blocked
// with the pause's reason — as a new call would — and its body is never entered; once
// the pause is lifted, calls run again.
func TestPausedToolIsBlockedBeforeItsBody(t *testing.T) {
	e := exectest.New(t, testConfig)
	inv := &scripted{body: text("ran")}
	start(t, e, inv)
	before := call("call_before", "tool", neverReplay)
	e.Allow(before)
	if got, _ := exectest.Text(t, e.WaitTerminal(before)); got != "ran" {
		t.Fatalf("before the pause: output %q, want ran", got)
	}

	kv, err := e.JS.KeyValue(e.Ctx, e.Names.ToolPausesBucket())
	if err != nil {
		t.Fatal(err)
	}
	pause := contracts.ToolPause{ToolID: "tool", Reason: "incident", Actor: "alice", PausedAt: time.Now().UTC()}
	data := []byte(`{"tool_id":"tool","reason":"incident","actor":"alice","paused_at":"` + pause.PausedAt.Format(time.RFC3339Nano) + `"}`)
	if _, err := kv.Put(e.Ctx, contracts.ToolPauseKey("tool"), data); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, exectest.Wait, func() bool { return e.WatchedPause(e.Ctx, "tool") != nil }, "the executors' view holds the pause")

	// Decided (Executing) before the pause, delivered after it.
	queued := call("call_queued", "tool", neverReplay)
	e.Allow(queued)
	rec := e.WaitTerminal(queued)
	got, isErr := exectest.Text(t, rec)
	if want := contracts.BlockedPrefix + pause.BlockReason(); got != want || !isErr {
		t.Fatalf("queued call: output %q (error %v), want %q as an error", got, isErr, want)
	}
	if n := len(inv.invocations()); n != 1 {
		t.Errorf("%d body invocations, want 1 (the call before the pause)", n)
	}
	if n := e.Ledger(queued); n != 0 {
		t.Errorf("ledger of the blocked call = %d, want 0", n)
	}

	if err := kv.Delete(e.Ctx, contracts.ToolPauseKey("tool")); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, exectest.Wait, func() bool { return e.WatchedPause(e.Ctx, "tool") == nil }, "the executors' view drops the lifted pause")
	after := call("call_after", "tool", neverReplay)
	e.Allow(after)
	if got, _ := exectest.Text(t, e.WaitTerminal(after)); got != "ran" {
		t.Fatalf("after the resume: output %q, want ran", got)
	}
}

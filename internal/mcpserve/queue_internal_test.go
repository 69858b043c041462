package mcpserve

import (
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
)

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestQueueOrderSurvivesAnEarlyLeave: a call that leaves the queue before its turn (its
// client cancelled it while it waited) frees its place at once but passes the turn on only
// when its predecessor's turn ends, so the call behind it never runs beside the running
// one (which would have submitted a batch while the run's previous one was open).
func TestQueueOrderSurvivesAnEarlyLeave(t *testing.T) {
	ss := &session{srv: &Server{opts: Options{Config: config.MCPServe{MaxQueuedCalls: 2}}}}
	waitA, doneA, ok := ss.admit()
	if !ok || waitA != nil {
		t.Fatal("the first call must run at once")
	}
	waitP, doneP, ok := ss.admit()
	if !ok {
		t.Fatal("the second call must be queued")
	}
	if _, _, ok := ss.admit(); ok {
		t.Fatal("a third call must be refused (max 2)")
	}
	ss.leave(waitP, doneP) // P cancelled while A runs
	waitQ, doneQ, ok := ss.admit()
	if !ok {
		t.Fatal("P's place must be free again")
	}
	if closed(waitQ) {
		t.Fatal("Q may run while A still runs")
	}
	ss.leave(waitA, doneA)
	select {
	case <-waitQ:
	case <-time.After(10 * time.Second):
		t.Fatal("Q's turn never came after A's")
	}
	ss.leave(waitQ, doneQ)
}

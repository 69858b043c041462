package execcore

import (
	"context"
	"errors"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestCancelCallReachesTheBodyPastADuplicate: a duplicate request of a call in flight is
// tracked under the same operation id while it looks at the record; its end must not take
// the running body out of reach of the call's cancellation.
func TestCancelCallReachesTheBodyPastADuplicate(t *testing.T) {
	var r runCancels
	body, untrackBody := r.track(context.Background(), "run-1", "op-1")
	defer untrackBody()
	_, untrackDuplicate := r.track(context.Background(), "run-1", "op-1")
	untrackDuplicate()
	cause := &callCancelled{cc: contracts.CallCancel{OperationID: "op-1", Reason: "stop"}}
	if !r.cancelCall("op-1", cause) {
		t.Fatal("the running body is no longer tracked")
	}
	var got *callCancelled
	if body.Err() == nil || !errors.As(context.Cause(body), &got) || got.cc.Reason != "stop" {
		t.Fatalf("body context: err %v cause %v, want cancelled by the call cancel", body.Err(), context.Cause(body))
	}
	if r.cancelCall("op-2", cause) {
		t.Fatal("cancelled a call that is not tracked")
	}
}

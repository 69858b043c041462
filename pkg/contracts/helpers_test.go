package contracts

import (
	"errors"
	"testing"
)

// checkRefusal fails t unless call (what was called, for the message) returned a nil err
// exactly when ok, and a refusal that wraps kind.
func checkRefusal(t testing.TB, call string, err error, ok bool, kind error) {
	t.Helper()
	if (err == nil) != ok {
		t.Fatalf("%s = %v, want ok=%v", call, err, ok)
	}
	if err != nil && !errors.Is(err, kind) {
		t.Fatalf("error %v does not wrap %v", err, kind)
	}
}

func ptr[T any](v T) *T { return &v }

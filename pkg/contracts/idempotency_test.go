package contracts_test

import (
	"regexp"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestIdempotencyKey: the key is the RFC 9562 UUIDv5 of the operation id (the value
// Python's uuid.uuid5 gives for the same namespace and name), stable, and distinct per
// operation.
func TestIdempotencyKey(t *testing.T) {
	op := contracts.OperationID("run-7", 3, "call_1")
	if got, want := contracts.IdempotencyKey(op), "cfd3ef2c-6bab-52ae-b1f1-c489b9e73a22"; got != want {
		t.Fatalf("IdempotencyKey(%q) = %s, want %s", op, got, want)
	}
	if contracts.IdempotencyKey(op) != contracts.IdempotencyKey(op) {
		t.Fatal("not stable")
	}
	other := contracts.IdempotencyKey(contracts.OperationID("run-7", 3, "call_2"))
	if other == contracts.IdempotencyKey(op) {
		t.Fatal("two operations share a key")
	}
	uuid5 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if long := contracts.IdempotencyKey(contracts.OperationID("run-7", 3, "functions.echo:0")); !uuid5.MatchString(long) || !uuid5.MatchString(other) {
		t.Fatalf("not a version 5 UUID: %s %s", long, other)
	}
}

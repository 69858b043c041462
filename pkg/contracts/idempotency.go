package contracts

import (
	"crypto/sha1" // UUIDv5 is defined on SHA-1; the key is a name, not a secret
	"encoding/hex"
)

// Where a tool finds its idempotency key: the _meta key of an MCP tools/call request and
// the environment variable of a WebAssembly module. A Go tool reads it with
// executor.IdempotencyKey(ctx).
const (
	MetaIdempotencyKey = "io.awaken/idempotency-key"
	EnvIdempotencyKey  = "AWAKEN_IDEMPOTENCY_KEY"
)

// MetaCost is the _meta key of an MCP tools/call result under which a server reports what
// the call cost (a JSON number ≥ 0, in the unit of the host's budget limits): the budget is
// charged it instead of the tool's configured cost (a Go tool calls executor.ReportCost).
const MetaCost = "io.awaken/cost"

// idempotencyNamespace is the UUIDv5 namespace of idempotency keys: the UUIDv5 of the
// name "urn:awaken:idempotency-key" in the URL namespace of RFC 9562,
// fe7bd4f3-00aa-5dc8-84d9-54c5bbb874db.
var idempotencyNamespace = [16]byte{0xfe, 0x7b, 0xd4, 0xf3, 0x00, 0xaa, 0x5d, 0xc8,
	0x84, 0xd9, 0x54, 0xc5, 0xbb, 0xb8, 0x74, 0xdb}

// IdempotencyKey returns the idempotency key of the call whose operation id is
// operationID: the name-based UUID (version 5, RFC 9562) of the operation id in awaken's
// namespace, e.g. cfd3ef2c-6bab-52ae-b1f1-c489b9e73a22 for tool-batch:run-7:3:call_1.
//
// It is derived from the operation id alone, not from the attempt, so every execution of
// one call — a redelivery, a replay after a crash, a resumed approval, an executor
// restarted on another host — hands the tool the same key, and a provider that
// deduplicates by it runs the effect once however often awaken has to run the body. A
// UUID rather than the operation id itself: it is 36 ASCII characters whatever the run
// and call ids are (an operation id can be several hundred bytes and holds ':' and '='),
// which every provider's Idempotency-Key header accepts, and it names no run or call to a
// third party.
func IdempotencyKey(operationID string) string {
	h := sha1.New()
	h.Write(idempotencyNamespace[:])
	h.Write([]byte(operationID))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

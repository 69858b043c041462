package state

import (
	"context"

	"github.com/nats-io/nats.go"
)

// A WriteObserver is told of every announced revision a store wrote under a context that
// carries it ([ObserveWrites]): the bucket, the key and the revision's headers, after the
// server acknowledged the write. Revisions that failed (a lost compare-and-swap retried by
// [Store.Update]) are not reported, so what an observer sees is what was stored.
type WriteObserver func(bucket, key string, hdr nats.Header)

type observerKey struct{}

// ObserveWrites returns ctx carrying observe: the stores report to it each announced
// revision written under the returned context. An observer already on ctx is replaced
// for the writes made under the returned context.
func ObserveWrites(ctx context.Context, observe WriteObserver) context.Context {
	return context.WithValue(ctx, observerKey{}, observe)
}

// observed reports a stored announced revision to ctx's observer, if any.
func observed(ctx context.Context, bucket, key string, hdr nats.Header) {
	if observe, ok := ctx.Value(observerKey{}).(WriteObserver); ok && observe != nil {
		observe(bucket, key, hdr)
	}
}

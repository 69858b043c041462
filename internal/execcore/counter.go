package execcore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrCorruptCounter is returned by [Increment] when the stored value is not a decimal
// unsigned integer: the counter is left untouched rather than silently reset.
var ErrCorruptCounter = errors.New("counter value is not a decimal unsigned integer")

// maxIncrementRounds bounds the compare-and-swap rounds of one [Increment]; contention on a
// single counter beyond that is a bug or an attack, not a workload.
const maxIncrementRounds = 1000

// Increment adds one to the decimal ASCII counter at key in kv and returns the new value.
// A missing (or deleted) key is created with 1. It is a compare-and-swap loop — Create,
// else Update at the read revision, re-reading on conflict — so concurrent increments from
// any number of processes are never lost. It is not idempotent: each call counts once.
func Increment(ctx context.Context, kv jetstream.KeyValue, key string) (uint64, error) {
	return increment(ctx, kv, key, false)
}

// increment is [Increment]; with createFirst it starts with a Create, which saves a round
// trip for counters that usually do not exist yet (the ledger of a fresh operation).
func increment(ctx context.Context, kv jetstream.KeyValue, key string, createFirst bool) (uint64, error) {
	if createFirst {
		if _, err := kv.Create(ctx, key, []byte("1")); err == nil {
			return 1, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("counter %s: create: %w", key, err)
		}
	}
	for range maxIncrementRounds {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := kv.Create(ctx, key, []byte("1")); err == nil {
				return 1, nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return 0, fmt.Errorf("counter %s: create: %w", key, err)
			}
			continue // created concurrently: read it again
		case err != nil:
			return 0, fmt.Errorf("counter %s: read: %w", key, err)
		}
		n, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("counter %s: %w: %q", key, ErrCorruptCounter, e.Value())
		}
		next := n + 1
		if _, err := kv.Update(ctx, key, []byte(strconv.FormatUint(next, 10)), e.Revision()); err == nil {
			return next, nil
		} else if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("counter %s: update: %w", key, err)
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("counter %s: %w", key, err)
		}
	}
	return 0, fmt.Errorf("counter %s: gave up after %d conflicting updates", key, maxIncrementRounds)
}

// ReadCounter returns the value of the counter at key, 0 when it does not exist.
func ReadCounter(ctx context.Context, kv jetstream.KeyValue, key string) (uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("counter %s: read: %w", key, err)
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter %s: %w: %q", key, ErrCorruptCounter, e.Value())
	}
	return n, nil
}

// ReadDeploymentCounter is [ReadCounter] on the counters bucket of the deployment js
// reaches under names: a reading from outside the executors (the `awaken counter`
// command, the tests that count body runs).
func ReadDeploymentCounter(ctx context.Context, js jetstream.JetStream, names contracts.Names, key string) (uint64, error) {
	kv, err := js.KeyValue(ctx, names.CountersBucket())
	if err != nil {
		return 0, fmt.Errorf("counters: %w", err)
	}
	return ReadCounter(ctx, kv, key)
}

// LedgerKey is the body-run ledger key of one operation: "ledger.{run}.{step}.{call}".
// Run and call ids cannot contain '.', so the key is unique per operation id.
func LedgerKey(runID string, step int64, callID string) string {
	return "ledger." + contracts.OperationKey(runID, step, callID)
}

// Ledger records that the body of an operation is about to run. The executor calls it
// through [Invocation.BeginBody], once per body run, before the body starts.
type Ledger interface {
	BodyStarting(ctx context.Context, inv Invocation) error
}

// KVLedger is the body-run ledger in a counters bucket: every body start increments
// [LedgerKey] of its operation with [Increment]. It is safe for concurrent use.
type KVLedger struct {
	KV jetstream.KeyValue
}

// ConfiguredLedger is the body-run ledger env's configuration asks for: a [KVLedger] on
// the counters bucket when executors.body_ledger is on, none (nil) otherwise. Both
// executors take it, so the bucket is opened only where a ledger is kept.
func ConfiguredLedger(ctx context.Context, env *pipeline.Env) (Ledger, error) {
	if !env.Config.Executors.BodyLedger {
		return nil, nil
	}
	counters, err := env.OpenCounters(ctx)
	if err != nil {
		return nil, fmt.Errorf("body-run ledger: %w", err)
	}
	return KVLedger{KV: counters}, nil
}

// BodyStarting increments the operation's ledger counter. A failure is reported as
// UnavailableBeforeDispatch: the body has not started, so the executor may retry.
func (l KVLedger) BodyStarting(ctx context.Context, inv Invocation) error {
	if _, err := increment(ctx, l.KV, LedgerKey(inv.RunID, inv.Step, inv.CallID), true); err != nil {
		return contracts.UnavailableBeforeDispatch("body-run ledger: " + err.Error())
	}
	return nil
}

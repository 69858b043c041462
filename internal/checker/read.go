package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Read takes a snapshot of what the pipeline durably did: the results, audit and tickets
// streams in full and the body-run ledger of the counters bucket. Call it once the
// pipeline is quiescent (every accepted batch published); it reads each stream up to its
// last sequence at the time of the call.
//
// The results and audit streams of every partition are read (the deployment's partition
// count, whatever names says): a run's messages are all in its partition's.
func Read(ctx context.Context, js jetstream.JetStream, names contracts.Names) (*Observed, error) {
	o := &Observed{}
	names, err := bus.DeploymentNames(ctx, js, names)
	if err != nil {
		return nil, fmt.Errorf("checker: %w", err)
	}
	for _, pn := range names.EachPartition() {
		results, err := readStream(ctx, js, pn.ResultsStream())
		if err != nil {
			return nil, err
		}
		audit, err := readStream(ctx, js, pn.AuditStream())
		if err != nil {
			return nil, err
		}
		o.Results, o.Audit = append(o.Results, results...), append(o.Audit, audit...)
	}
	if o.Tickets, err = readStream(ctx, js, names.TicketsStream()); err != nil {
		return nil, err
	}
	if o.Ledger, err = readLedger(ctx, js, names); err != nil {
		return nil, err
	}
	return o, nil
}

// readLedger reads the body-run ledger of the counters bucket: by operation key, how many
// times the body started and when the last start was recorded.
func readLedger(ctx context.Context, js jetstream.JetStream, names contracts.Names) (map[string]LedgerEntry, error) {
	ledger := map[string]LedgerEntry{}
	kv, err := js.KeyValue(ctx, names.CountersBucket())
	if err != nil {
		return nil, fmt.Errorf("checker: counters bucket: %w", err)
	}
	lister, err := kv.ListKeysFiltered(ctx, "ledger.>")
	if err != nil {
		return nil, fmt.Errorf("checker: ledger keys: %w", err)
	}
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("checker: ledger %s: %w", key, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(e.Value())))
		if err != nil {
			return nil, fmt.Errorf("checker: ledger %s holds %q: %w", key, e.Value(), err)
		}
		ledger[strings.TrimPrefix(key, "ledger.")] = LedgerEntry{Count: n, At: e.Created()}
	}
	return ledger, nil
}

// readStream reads every message of a stream, in sequence order, through an ordered
// consumer, stopping at the last sequence the stream held when the read began.
func readStream(ctx context.Context, js jetstream.JetStream, name string) ([]Message, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("checker: stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("checker: stream %s: %w", name, err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("checker: read %s: %w", name, err)
	}
	var out []Message
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("checker: read %s: %w", name, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("checker: read %s: %w", name, err)
			}
			msg := Message{Seq: md.Sequence.Stream, Stream: name, Time: md.Timestamp, Subject: m.Subject()}
			if ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data()); err == nil {
				msg.Type, msg.Data = ev.Type, ev.Data
			} else {
				msg.Type, msg.Data = "undecodable: "+err.Error(), m.Data()
			}
			out = append(out, msg)
			if md.Sequence.Stream >= last || md.NumPending == 0 {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("checker: read %s: %w", name, err)
		}
		if got == 0 {
			// Nothing more arrived: the stream's tail was removed (e.g. a fired schedule).
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("checker: read %s: %w", name, err)
			}
			return out, nil
		}
	}
}

// reportFunc records a violation of kind k for the batch and call named (either may be
// empty), its detail formatted from format and args.
type reportFunc func(k Kind, batchID, callID, format string, args ...any)

// decodeOrReport decodes m's data as a T. A message that does not decode is reported as
// malformed (what names the message in the detail) and ok is false.
func decodeOrReport[T any](m Message, what string, report reportFunc) (v T, ok bool) {
	if err := json.Unmarshal(m.Data, &v); err != nil {
		report(KindMalformed, "", "", "%s seq %d: %v", what, m.Seq, err)
		return v, false
	}
	return v, true
}

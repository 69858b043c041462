package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// batchWatchCommand implements `awaken batch watch BATCH_ID`: it prints every change of the
// batch's call records (phase, and the outcome once terminal) and every progress event of
// its calls, live, until the batch is published. Progress comes from a plain subscription
// on the run's events subject — it is best effort by design — and the states from watches
// of the records, which first deliver what is already there, so a watch started late
// still prints every call's current state.
func batchWatchCommand(fs *flag.FlagSet, cio cmdIO) runner {
	connect := dialClient(fs)
	return func(ctx context.Context, args []string) error {
		return runBatchWatch(ctx, connect, args, cio.stdout)
	}
}

func runBatchWatch(ctx context.Context, connect connectFunc, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return &usageError{"usage: awaken batch watch BATCH_ID"}
	}
	batchID := args[0]
	runID, step, err := contracts.ParseBatchID(batchID)
	if err != nil {
		return &usageError{fmt.Sprintf("%v (a batch id looks like tool-batch:RUN_ID:STEP)", err)}
	}
	c, ctx, done, err := connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	names := c.Names().Of(runID) // the run's records are in its partition's buckets
	lines := make(chan string, 256)
	sub, err := c.Conn().Subscribe(names.EventsSubject(runID), func(m *nats.Msg) {
		if line, ok := progressLine(m, batchID); ok {
			select {
			case lines <- line:
			default: // a reader that falls behind skips progress, never states
			}
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to the events of %s: %w", runID, err)
	}
	defer sub.Unsubscribe()
	calls, err := watchKeys(ctx, c.js, names.CallsBucket(), contracts.CallKeysOfBatch(runID, step))
	if err != nil {
		return err
	}
	defer calls.Stop()
	batch, err := watchKeys(ctx, c.js, names.BatchesBucket(), contracts.BatchKey(runID, step))
	if err != nil {
		return err
	}
	defer batch.Stop()
	callsKV, err := c.js.KeyValue(ctx, names.CallsBucket())
	if err != nil {
		return err
	}
	terminal := map[string]bool{} // call id → its terminal state was printed
	printCall := func(e jetstream.KeyValueEntry) {
		line, callID, done := callLine(e)
		terminal[callID] = terminal[callID] || done
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "watching %s\n", batchID)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("watching %s: %w", batchID, ctx.Err())
		case line := <-lines:
			fmt.Fprintln(stdout, line)
		case e, ok := <-calls.Updates():
			if !ok {
				return errors.New("the call records watch ended")
			}
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				printCall(e)
			}
		case e, ok := <-batch.Updates():
			if !ok {
				return errors.New("the batch record watch ended")
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec contracts.BatchRecord
			if err := contracts.DecodeRecord(e.Value(), &rec); err != nil {
				return fmt.Errorf("batch record: %w", err)
			}
			if rec.Phase == contracts.BatchPhasePublished {
				// Every call is terminal once the batch is published; the watch may not
				// have delivered the last states yet, so read the ones it has not.
				for i, call := range rec.Submission.Calls {
					if terminal[call.CallID] {
						continue
					}
					if e, err := callsKV.Get(ctx, contracts.CallKeyOf(&rec, i)); err == nil {
						printCall(e)
					}
				}
				fmt.Fprintf(stdout, "batch %s published\n", batchID)
				return nil
			}
		}
	}
}

func watchKeys(ctx context.Context, js jetstream.JetStream, bucket, filter string) (jetstream.KeyWatcher, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	w, err := kv.Watch(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", bucket, err)
	}
	return w, nil
}

// callLine is "call CALL_ID (TOOL_ID): PHASE[ outcome]", with the call id and whether the
// phase is terminal.
func callLine(e jetstream.KeyValueEntry) (line, callID string, terminal bool) {
	key := e.Key()
	callID = key[strings.LastIndexByte(key, '.')+1:]
	var rec contracts.CallRecord
	if err := contracts.DecodeRecord(e.Value(), &rec); err != nil {
		return fmt.Sprintf("call %s: unreadable record: %v", callID, err), callID, false
	}
	line = fmt.Sprintf("call %s (%s): %s", callID, rec.ToolID, rec.Phase.Kind)
	switch {
	case rec.Phase.Kind == contracts.PhaseExecuting && rec.Entered:
		line += fmt.Sprintf(" (attempt %d, running)", rec.Phase.Attempt)
	case rec.Phase.Kind == contracts.PhaseExecuting && rec.SlotWait != "":
		line += fmt.Sprintf(" (waiting for a slot of limit %s)", rec.SlotWait)
	case rec.Phase.Kind == contracts.PhaseIndeterminate:
		line += ": " + rec.Phase.Reason
	case rec.Phase.Output != nil:
		text := cmp.Or(rec.Phase.Output.Text(), rec.Phase.Output.LinkText())
		if len(text) > 120 {
			text = text[:120] + "…"
		}
		if rec.Phase.Output.IsError {
			line += " (error)"
		}
		line += fmt.Sprintf(": %q", text)
	}
	return line, callID, rec.Phase.IsTerminal()
}

// progressLine is "progress CALL_ID: P/T message" for a progress event of batchID.
func progressLine(m *nats.Msg, batchID string) (string, bool) {
	ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil || ev.Type != contracts.TypeToolProgress {
		return "", false
	}
	var p contracts.ToolProgress
	if json.Unmarshal(ev.Data, &p) != nil || p.BatchID != batchID {
		return "", false
	}
	amount := fmt.Sprintf("%g", p.Progress)
	if p.Total > 0 {
		amount += fmt.Sprintf("/%g", p.Total)
	}
	line := fmt.Sprintf("progress %s (%s): %s", p.CallID, p.ToolID, amount)
	if p.Message != "" {
		line += " " + p.Message
	}
	return line, true
}

package contracts

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxIDLength bounds every identifier of the protocol.
const MaxIDLength = 200

// ErrInvalidID is wrapped by every identifier validation failure.
var ErrInvalidID = errors.New("invalid id")

// ValidateID checks that id matches ^[A-Za-z0-9_-]{1,200}$, which keeps identifiers safe
// as NATS subject tokens and KV key parts. field names the offending attribute.
func ValidateID(field, id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidID, field)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidID, field, MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q contains %q (allowed: A-Z a-z 0-9 _ -)", ErrInvalidID, field, id, c)
		}
	}
	return nil
}

// BatchID returns the derived batch id "tool-batch:{run_id}:{step}".
func BatchID(runID string, step int64) string {
	return "tool-batch:" + runID + ":" + strconv.FormatInt(step, 10)
}

// OperationID returns the durable operation id "{batch_id}:{call_id}" that keys every
// exactly-once check of a call.
func OperationID(runID string, step int64, callID string) string {
	return BatchID(runID, step) + ":" + callID
}

// ParseBatchID splits a batch id into its run id and step. It fails unless id was made by
// [BatchID] from a valid run id and a non-negative step.
func ParseBatchID(id string) (runID string, step int64, err error) {
	rest, ok := strings.CutPrefix(id, "tool-batch:")
	if !ok {
		return "", 0, fmt.Errorf("%w: batch id %q lacks the tool-batch: prefix", ErrInvalidID, id)
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("%w: batch id %q has no step", ErrInvalidID, id)
	}
	runID = rest[:i]
	step, perr := strconv.ParseInt(rest[i+1:], 10, 64)
	if perr != nil || step < 0 {
		return "", 0, fmt.Errorf("%w: batch id %q has an invalid step", ErrInvalidID, id)
	}
	if err := ValidateID("run_id", runID); err != nil {
		return "", 0, err
	}
	return runID, step, nil
}

// CorrelationID returns the ticket correlation id of a parked call: "{kind}.{run_id}.{step}.{call_id}"
// with kind "perm", "sched" or "client". Ids cannot contain '.', so the form is unique
// across runs and batches, parseable, and safe as a KV key and URL path segment.
func CorrelationID(reason TicketReason, runID string, step int64, callID string) string {
	kind := "perm"
	switch reason {
	case ReasonScheduledAction:
		kind = "sched"
	case ReasonClientExecution:
		kind = "client"
	}
	return kind + "." + runID + "." + strconv.FormatInt(step, 10) + "." + callID
}

package contracts

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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

// MaxCallIDLength bounds a call id: providers choose call ids, so they get more room and a
// wider alphabet than the ids awaken's platform names ([ValidateCallID]).
const MaxCallIDLength = 256

// ValidateCallID checks a call id as providers make them: 1 to [MaxCallIDLength] bytes of
// UTF-8 without control characters. OpenAI's "call_…", Anthropic's "toolu_…", Mistral's
// nine alphanumerics and "functions.echo:0" all pass. The id is kept verbatim in every
// payload; wherever it names a subject token, a KV key, a correlation id, an event id or a
// URL path segment it goes through [EncodeCallID] first.
func ValidateCallID(field, id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidID, field)
	}
	if len(id) > MaxCallIDLength {
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidID, field, MaxCallIDLength)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalidID, field)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q contains the control character %U", ErrInvalidID, field, id, r)
		}
	}
	return nil
}

// callIDEncodedMark starts an encoded call id. It is outside the verbatim alphabet, so an
// encoded id never equals a verbatim one, and it is allowed in subject tokens, KV keys,
// correlation ids, object names and URL path segments.
const callIDEncodedMark = "="

// EncodeCallID is the one encoding of a call id wherever it becomes part of a name: a
// subject token, a KV key, a correlation id, an operation id (and so every Nats-Msg-Id and
// object name derived from it) or a URL path segment. An id of A-Z a-z 0-9 _ - only is
// itself (so names made before call ids widened stay the same); any other is "=" followed
// by the unpadded base64url of its bytes. The encoding is injective — a verbatim id holds no
// "=", base64 is one-to-one — so two call ids never share a name; [DecodeCallID] inverts it.
func EncodeCallID(id string) string {
	if subjectSafe(id) {
		return id
	}
	return callIDEncodedMark + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// DecodeCallID inverts [EncodeCallID]; it fails for a token EncodeCallID cannot make from a
// valid call id.
func DecodeCallID(token string) (string, error) {
	if b64, ok := strings.CutPrefix(token, callIDEncodedMark); ok {
		raw, err := base64.RawURLEncoding.Strict().DecodeString(b64)
		if err != nil {
			return "", fmt.Errorf("%w: encoded call id %q: %v", ErrInvalidID, token, err)
		}
		id := string(raw)
		if subjectSafe(id) {
			return "", fmt.Errorf("%w: encoded call id %q is not in canonical form", ErrInvalidID, token)
		}
		if err := ValidateCallID("call_id", id); err != nil {
			return "", err
		}
		return id, nil
	}
	if !subjectSafe(token) || len(token) > MaxCallIDLength {
		return "", fmt.Errorf("%w: call id token %q", ErrInvalidID, token)
	}
	return token, nil
}

// subjectSafe reports whether id is non-empty and made of A-Z a-z 0-9 _ - only.
func subjectSafe(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// BatchID returns the derived batch id "tool-batch:{run_id}:{step}".
func BatchID(runID string, step int64) string {
	return "tool-batch:" + runID + ":" + strconv.FormatInt(step, 10)
}

// OperationID returns the durable operation id "{batch_id}:{call_id}" that keys every
// exactly-once check of a call, with the call id encoded by [EncodeCallID] (the operation
// id is the stem of event ids and object names).
func OperationID(runID string, step int64, callID string) string {
	return BatchID(runID, step) + ":" + EncodeCallID(callID)
}

// ParseOperationID inverts [OperationID]: it fails (with [ErrInvalidID]) for any id
// OperationID cannot have made. Encoded call ids hold no ':', so the last ':' ends the
// batch id.
func ParseOperationID(op string) (runID string, step int64, callID string, err error) {
	i := strings.LastIndexByte(op, ':')
	if i < 0 {
		return "", 0, "", fmt.Errorf("%w: operation id %q has no call id", ErrInvalidID, op)
	}
	if runID, step, err = ParseBatchID(op[:i]); err != nil {
		return "", 0, "", err
	}
	if callID, err = DecodeCallID(op[i+1:]); err != nil {
		return "", 0, "", err
	}
	if OperationID(runID, step, callID) != op {
		return "", 0, "", fmt.Errorf("%w: operation id %q is not in canonical form", ErrInvalidID, op)
	}
	return runID, step, callID, nil
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
// with kind "perm", "sched" or "client" and the call id encoded by [EncodeCallID]. Neither
// run ids nor encoded call ids contain '.', so the form is unique across runs and batches,
// parseable ([ParseCorrelationID]), and safe as a KV key, a subject token and a URL path
// segment.
func CorrelationID(reason TicketReason, runID string, step int64, callID string) string {
	kind := "perm"
	switch reason {
	case ReasonScheduledAction:
		kind = "sched"
	case ReasonClientExecution:
		kind = "client"
	}
	return kind + "." + runID + "." + strconv.FormatInt(step, 10) + "." + EncodeCallID(callID)
}

// CorrelationIDsOfCall matches, as a KV key filter, the correlation id of every kind
// [CorrelationID] can give the call (runID, step, callID): "*.{run_id}.{step}.{call_id}".
func CorrelationIDsOfCall(runID string, step int64, callID string) string {
	return "*." + runID + "." + strconv.FormatInt(step, 10) + "." + EncodeCallID(callID)
}

// ParseCorrelationID inverts [CorrelationID]: it fails (with [ErrInvalidID]) for any id
// CorrelationID cannot have made, under which no ticket can ever exist.
func ParseCorrelationID(corr string) (reason TicketReason, runID string, step int64, callID string, err error) {
	bad := func(why string) error { return fmt.Errorf("%w: correlation id %q %s", ErrInvalidID, corr, why) }
	if len(corr) > MaxCorrelationIDLength {
		return "", "", 0, "", bad("is too long")
	}
	parts := strings.Split(corr, ".")
	if len(parts) != 4 {
		return "", "", 0, "", bad("does not have four dot-separated parts")
	}
	switch parts[0] {
	case "perm":
		reason = ReasonPermission
	case "sched":
		reason = ReasonScheduledAction
	case "client":
		reason = ReasonClientExecution
	default:
		return "", "", 0, "", bad("has an unknown kind")
	}
	step, perr := strconv.ParseInt(parts[2], 10, 64)
	if perr != nil || step < 0 {
		return "", "", 0, "", bad("has an invalid step")
	}
	if ValidateID("run_id", parts[1]) != nil {
		return "", "", 0, "", bad("has an invalid run id")
	}
	if callID, err = DecodeCallID(parts[3]); err != nil {
		return "", "", 0, "", bad("has an invalid call id")
	}
	if CorrelationID(reason, parts[1], step, callID) != corr {
		return "", "", 0, "", bad("is not in canonical form")
	}
	return reason, parts[1], step, callID, nil
}

package contracts

import "fmt"

// RejectCode is the machine-readable reason an inbound message was refused. Every code is
// published in a rejection event and recorded on the dead-letter copy of the message.
type RejectCode string

const (
	// Envelope (CloudEvent) problems.
	RejectWrongType          RejectCode = "wrong_type"
	RejectMissingAttribute   RejectCode = "missing_attribute"
	RejectUnsupportedContent RejectCode = "unsupported_content_type"
	// RejectMissingCloudEventHeaders: the message carries no CloudEvents attributes at all
	// — no ce-* headers, and a body that is not a structured CloudEvent (no specversion),
	// typically a bare submission published without headers; the message names the
	// headers a binary-mode submission needs.
	RejectMissingCloudEventHeaders RejectCode = "missing_cloudevent_headers"
	// Payload problems.
	RejectInvalidJSON   RejectCode = "invalid_json"
	RejectInvalidUTF8   RejectCode = "invalid_utf8"
	RejectTooLarge      RejectCode = "too_large"
	RejectTooDeep       RejectCode = "too_deep"
	RejectUnknownField  RejectCode = "unknown_field"
	RejectInvalidID     RejectCode = "invalid_id"
	RejectInvalidStep   RejectCode = "invalid_step"
	RejectInvalidField  RejectCode = "invalid_field"
	RejectEmptyBatch    RejectCode = "empty_batch"
	RejectDuplicateCall RejectCode = "duplicate_call"
	RejectTooManyCalls  RejectCode = "too_many_calls"
	RejectConflict      RejectCode = "conflict"
	// RejectInvalidPolicy: the submission's run policy does not compile (a pattern the
	// rule grammar refuses); the message names the rule and why.
	RejectInvalidPolicy RejectCode = "invalid_policy"
	// Run lifecycle: the run cannot take this batch now or ever.
	// RejectRunBusy: an earlier batch of the run is not published yet (one active batch
	// per run); nothing of this submission is stored, so it may be sent again (under a new
	// ce-id) once that batch is published.
	RejectRunBusy RejectCode = "run_busy"
	// RejectRunCancelled: the run was cancelled; it takes no more batches.
	RejectRunCancelled RejectCode = "run_cancelled"
	// RejectRunEnded: the run ended (for example in a state conflict); it takes no more
	// batches.
	RejectRunEnded RejectCode = "run_ended"
	// RejectStaleStep: the step is at or below the last step the run accepted, and the run
	// keeps no record of a batch of it — a batch finished longer ago than the run
	// retention, whose records are gone, or a step the run went past without submitting.
	// It is not run: a batch may have run under that id, and running it again would run
	// its calls twice (docs/protocol.md, "Exactly once across retention").
	RejectStaleStep RejectCode = "stale_step"
	// RejectUnsupportedFormat: a stored record or a message is of a format version this
	// version does not read — written by a newer version, or by one more than a version
	// older (docs/operations.md, "Upgrades and compatibility").
	RejectUnsupportedFormat RejectCode = "unsupported_format"
)

// Limits of a submission.
const (
	MaxSubmissionBytes = 1 << 20
	MaxCallsPerBatch   = 512
	MaxJSONDepth       = 64
)

// Rejection is a typed refusal of an inbound message: a code from the list above and a
// message a person can act on. It is an error so decoders can return it directly.
type Rejection struct {
	Code    RejectCode
	Message string
}

// Reject builds a [*Rejection] with a formatted message.
func Reject(code RejectCode, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (r *Rejection) Error() string { return string(r.Code) + ": " + r.Message }

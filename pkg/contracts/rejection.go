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

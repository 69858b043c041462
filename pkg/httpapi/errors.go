package httpapi

// Error codes of the api itself. Refusals of a resume command carry the gate's
// [contracts.ResumeErrorCode] instead (not_waiting, expired, run_mismatch, …), unchanged,
// so a caller sees the same code whichever door it used.
const (
	// CodeInvalidRequest: the request is malformed (bad JSON, unknown field, bad id).
	CodeInvalidRequest = "invalid_request"
	// CodeUnsupportedMediaType: a mutating request without Content-Type application/json.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeUnauthorized: the bearer token is missing or wrong.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: a cross-site request, or a Host header the api does not serve.
	CodeForbidden = "forbidden"
	// CodeNotFound: no such batch or route.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: the route exists with another method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeTimeout: the gate did not answer a resume command in time. The command is
	// durably queued on the tickets stream and will still be applied (or refused) later.
	CodeTimeout = "timeout"
	// CodeCancelTimeout (504): a run cancel was stored but the run was not seen ended
	// within the api's wait. The gate will still end it; cancelling again is harmless.
	CodeCancelTimeout = "cancel_timeout"
	// CodeUnavailable: the api is stopping, or too many requests are in flight.
	CodeUnavailable = "unavailable"
	// CodeObjectDigest (502): a stored object's bytes do not match the digest in its
	// name (it was overwritten after its link was published).
	CodeObjectDigest = "object_digest_mismatch"
	// CodeInternal: anything else (NATS unreachable, a corrupt record).
	CodeInternal = "internal"
)

// Error is a refusal of an api operation: a machine-readable Code, a human Message and the
// HTTP status it maps to. The micro endpoints put Code in the Nats-Service-Error-Code header
// and both doors reply with the body {"code","message"}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Status is the HTTP status of the refusal.
	Status int `json:"-"`
	// Err is the cause, for errors.Is/As and the server's log; it is never encoded, so a
	// caller never sees it (a decoded Error has none).
	Err error `json:"-"`
}

// Error renders "code: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeMissingRole (403): the request's token does not carry a role the route needs.
const CodeMissingRole = "missing_role"

// CodeCallTerminal (409): the call to cancel is already Completed or Indeterminate; nothing
// changed. The error's message says how it ended.
const CodeCallTerminal = "call_terminal"

// CodeCallCancelTimeout (504): the call cancel was stored but the call was not seen ending
// within the api's wait — a Requested call waits for its batch to reach it (an earlier
// call still runs or waits), a body being stopped for its grace. The gate will still apply
// it; cancelling again is harmless.
const CodeCallCancelTimeout = "call_cancel_timeout"

// Codes of a call resolution's refusal.
const (
	// CodeCallNotIndeterminate (409): only an Indeterminate call may be resolved; nothing
	// changed. The message says the call's phase.
	CodeCallNotIndeterminate = "call_not_indeterminate"
	// CodeCallAlreadyResolved (409): another resolution of the call was recorded first;
	// nothing changed. The message says whose.
	CodeCallAlreadyResolved = "call_already_resolved"
	// CodeInvalidResolution (422): the outcome is not ran or not_run, ran has no output or
	// one that is not a valid tool output for the call, not_run has an output, the output
	// stages state, or the note is too long.
	CodeInvalidResolution = "invalid_resolution"
	// CodeCallResolveTimeout (504): the resolution was stored but not seen recorded within
	// the api's wait; the gate still applies it (a batch finalized a moment ago is waited
	// for until its results are published). Sending it again is refused with
	// call_already_resolved once it is recorded.
	CodeCallResolveTimeout = "call_resolve_timeout"
)

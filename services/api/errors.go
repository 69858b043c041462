package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

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
	// err is the cause, for errors.Is/As and logs; it is never shown to callers.
	err error
}

// Error renders "code: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.err }

func apiErr(status int, code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Status: status}
}

// internalErr wraps an unexpected failure. The message is generic so that internal details
// (subjects, bucket names, server errors) never reach an unauthenticated caller; the cause
// is kept for the log.
func internalErr(err error) *Error {
	return &Error{Code: CodeInternal, Message: "internal error; see the api log", Status: http.StatusInternalServerError, err: err}
}

// StatusForResumeCode maps a gate refusal code to an HTTP status: 409 Conflict when the
// ticket is not (or no longer) waiting or its deadline passed, 422 when the command names
// another correlation, run, thread, snapshot, call or result kind than the ticket or its
// edited arguments do not fit the tool (invalid_arguments), 400 for
// a structurally invalid command. ticketKnown distinguishes a not_waiting for a correlation
// under which no ticket was ever opened (404) from one whose ticket was resolved, expired
// or cleared (409).
func StatusForResumeCode(code string, ticketKnown bool) int {
	switch contracts.ResumeErrorCode(code) {
	case contracts.ResumeNotWaiting:
		if !ticketKnown {
			return http.StatusNotFound
		}
		return http.StatusConflict
	case contracts.ResumeExpired, contracts.ResumeDigestMismatch, contracts.ResumeDuplicateApprover:
		return http.StatusConflict
	case contracts.ResumeInvalidArguments, contracts.ResumeCorrelationMismatch, contracts.ResumeRunMismatch, contracts.ResumeThreadMismatch,
		contracts.ResumeSnapshotMismatch, contracts.ResumeResultKindMismatch, contracts.ResumeToolCallMismatch,
		contracts.ResumeReservedActor, contracts.ResumeApproverNotAuthenticated, contracts.ResumeEditNeedsSingleApproval:
		return http.StatusUnprocessableEntity
	case contracts.ResumeInvalid:
		return http.StatusBadRequest
	}
	// A decoder rejection code (invalid_json, unknown_field, …) is a bad request too.
	return http.StatusBadRequest
}

// asError converts any error of an operation to an *Error: an *Error is returned as is, a
// refusal by the gate keeps its code, anything else is internal.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var rr *client.ResumeRejectedError
	if errors.As(err, &rr) {
		return &Error{Code: rr.Code, Message: rr.Message, Status: StatusForResumeCode(rr.Code, true), err: err}
	}
	var re *contracts.ResumeError
	if errors.As(err, &re) {
		return &Error{Code: string(re.Code), Message: re.Message, Status: StatusForResumeCode(string(re.Code), true), err: err}
	}
	var rj *contracts.Rejection
	if errors.As(err, &rj) {
		return &Error{Code: string(rj.Code), Message: rj.Message, Status: http.StatusBadRequest, err: err}
	}
	return internalErr(err)
}

package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

func apiErr(status int, code, format string, args ...any) *httpapi.Error {
	return &httpapi.Error{Code: code, Message: fmt.Sprintf(format, args...), Status: status}
}

// internalErr wraps an unexpected failure. The message is generic so that internal details
// (subjects, bucket names, server errors) never reach an unauthenticated caller; the cause
// is kept for the log.
func internalErr(err error) *httpapi.Error {
	return &httpapi.Error{Code: httpapi.CodeInternal, Message: "internal error; see the api log", Status: http.StatusInternalServerError, Err: err}
}

// invalidIDErr refuses an id that does not parse (400 invalid_id, the batcher's code).
func invalidIDErr(err error) *httpapi.Error {
	return &httpapi.Error{Code: string(contracts.RejectInvalidID), Message: err.Error(), Status: http.StatusBadRequest, Err: err}
}

// unseenErr answers a command that is stored, and so still applies, but whose effect the
// api did not see within its wait (err, the client's pending error): 503 unavailable with
// requestEnded when the caller's own request (ctx) ended first, else 504 with code and
// timedOut.
func unseenErr(ctx context.Context, err error, requestEnded, code, timedOut string) *httpapi.Error {
	if ctx.Err() != nil {
		return &httpapi.Error{Code: httpapi.CodeUnavailable, Status: http.StatusServiceUnavailable, Err: err, Message: requestEnded}
	}
	return &httpapi.Error{Code: code, Status: http.StatusGatewayTimeout, Err: err, Message: timedOut}
}

// StatusForResumeCode maps a gate refusal code to an HTTP status: 409 Conflict when the
// ticket is not (or no longer) waiting, its deadline passed, or a rate limit deferred it
// to a window not yet started, 422 when the command names
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
	case contracts.ResumeExpired, contracts.ResumeDigestMismatch, contracts.ResumeDuplicateApprover, contracts.ResumeDeferredByLimit:
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

// asError converts any error of an operation to an *httpapi.Error: one is returned as is, a
// refusal by the gate keeps its code, anything else is internal.
func asError(err error) *httpapi.Error {
	var e *httpapi.Error
	if errors.As(err, &e) {
		return e
	}
	var rr *client.ResumeRejectedError
	if errors.As(err, &rr) {
		return &httpapi.Error{Code: rr.Code, Message: rr.Message, Status: StatusForResumeCode(rr.Code, true), Err: err}
	}
	var re *contracts.ResumeError
	if errors.As(err, &re) {
		return &httpapi.Error{Code: string(re.Code), Message: re.Message, Status: StatusForResumeCode(string(re.Code), true), Err: err}
	}
	var rj *contracts.Rejection
	if errors.As(err, &rj) {
		return &httpapi.Error{Code: string(rj.Code), Message: rj.Message, Status: http.StatusBadRequest, Err: err}
	}
	return internalErr(err)
}

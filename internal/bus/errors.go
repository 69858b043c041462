package bus

import (
	"errors"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Dead-letter codes that are not rejection codes. They share the [contracts.RejectCode]
// type so the Awaken-Dead-Code header has one vocabulary.
const (
	// CodeExhausted marks a message whose handler kept failing transiently until MaxDeliver.
	CodeExhausted contracts.RejectCode = "exhausted"
	// CodePermanent marks a message whose handler returned [Permanent] without a rejection.
	CodePermanent contracts.RejectCode = "permanent"
)

// ErrAtomicDuplicate is returned by [Publisher.PublishAtomic] when the server refused the
// whole batch because one of its message ids is already in the stream's duplicate window
// (nats-server error 10201, "atomic publish batch contains duplicate message id"). Because
// awaken derives every message id from the operation id and stage, callers treat it as
// "this batch was already published".
var ErrAtomicDuplicate = errors.New("bus: atomic batch already published (duplicate message id)")

// errCodeAtomicDuplicate is JSAtomicPublishContainsDuplicateMessageErr in nats-server
// v2.15.2 (server/jetstream_errors_generated.go).
const errCodeAtomicDuplicate = 10201

type permanentError struct{ err error }

func (p *permanentError) Error() string { return "permanent: " + p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// Permanent marks err as a failure that no redelivery can fix (a malformed record, a
// violated invariant). The consumer treats it like a rejection: OnReject, dead letter,
// terminate. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err is marked [Permanent] or wraps a [*contracts.Rejection].
func IsPermanent(err error) bool {
	var p *permanentError
	var r *contracts.Rejection
	return errors.As(err, &p) || errors.As(err, &r)
}

type retryError struct {
	err   error
	delay time.Duration
}

func (r *retryError) Error() string { return "retry later: " + r.err.Error() }
func (r *retryError) Unwrap() error { return r.err }

// Retry asks the consumer to redeliver the message after delay without treating the
// attempt as a failure: it is logged at debug level, the back-off schedule is not used,
// and it never exhausts the message, however often it is returned. Use it for waits that
// are part of normal operation (a record another service has not written yet), not for
// errors. Retry(nil, d) is nil.
func Retry(err error, delay time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryError{err: err, delay: delay}
}

// RetryDelay returns the delay requested by [Retry] anywhere in err's chain.
func RetryDelay(err error) (time.Duration, bool) {
	var r *retryError
	if errors.As(err, &r) {
		return r.delay, true
	}
	return 0, false
}

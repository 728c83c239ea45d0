package stripepay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"

	"github.com/stripe/stripe-go/v82"
)

// ErrTransient is what errors.Is finds in an error of Checkout, ExpireSession or Refund that is
// worth retrying (Stripe gave no verdict: the same call, with the same idempotency key, may
// succeed).
var ErrTransient = errors.New("stripepay: transient error")

// Error is an error of a Stripe call: the operation ("checkout", "expire", "refund"), whether it
// is transient, and the cause (a *stripe.Error when Stripe answered one).
type Error struct {
	Op        string
	transient bool
	Err       error
}

func (e *Error) Error() string {
	kind := "permanent"
	if e.transient {
		kind = "transient"
	}
	return fmt.Sprintf("stripe %s (%s): %v", e.Op, kind, describe(e.Err))
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrTransient) true for a transient error.
func (e *Error) Is(target error) bool { return target == ErrTransient && e.transient }

// Transient reports whether the call is worth retrying. A caller that does not import this
// package can ask through an interface: var t interface{ Transient() bool }; errors.As(err, &t).
func (e *Error) Transient() bool { return e.transient }

// Transient reports whether err (of Checkout, ExpireSession or Refund, or any error stripe-go
// returned) is worth retrying: a network error or timeout, a Stripe 5xx, a 409 (a request with the
// same idempotency key in flight), a 429 (rate_limit, lock_timeout). A 4xx invalid request, an
// authentication error and a cancelled context are permanent.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.transient
	}
	return transient(err)
}

func classify(op string, err error) error {
	return &Error{Op: op, transient: transient(err), Err: err}
}

func permanent(op string, err error) error {
	return &Error{Op: op, Err: err}
}

// undecodedStatus finds the HTTP status in stripe-go's error for an answer that was not JSON
// (a proxy's 502 page): "Couldn't deserialize JSON (response status: 502, …".
var undecodedStatus = regexp.MustCompile(`response status: (5\d\d|429)\b`)

// transient classifies an error of stripe-go.
func transient(err error) bool {
	var se *stripe.Error
	if errors.As(err, &se) {
		switch {
		case se.HTTPStatusCode >= 500, se.HTTPStatusCode == http.StatusTooManyRequests,
			se.HTTPStatusCode == http.StatusConflict:
			return true
		case se.Code == stripe.ErrorCodeLockTimeout, se.Code == stripe.ErrorCodeRateLimit,
			se.Code == stripe.ErrorCodeIdempotencyKeyInUse, se.Type == stripe.ErrorTypeAPI:
			return true
		}
		return false
	}
	switch {
	case errors.Is(err, context.Canceled):
		return false // the caller gave up
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return !unsupportedScheme.MatchString(ue.Error())
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return undecodedStatus.MatchString(err.Error())
}

var unsupportedScheme = regexp.MustCompile(`unsupported protocol scheme`)

// describe is an error's text, shorter for a Stripe error (its JSON form is long).
func describe(err error) string {
	if se, ok := err.(*stripe.Error); ok && se.Msg != "" {
		s := fmt.Sprintf("%d %s", se.HTTPStatusCode, se.Type)
		if se.Code != "" {
			s += " " + string(se.Code)
		}
		s += ": " + se.Msg
		if se.RequestID != "" {
			s += " (request " + se.RequestID + ")"
		}
		return s
	}
	return err.Error()
}

package shop

import (
	"errors"
	"fmt"
	"time"
)

// Code names a failure in the public contract's terms.
type Code string

// The error codes of the public contract.
const (
	CodeInvalidInput         Code = "INVALID_INPUT"
	CodeUnauthenticated      Code = "UNAUTHENTICATED"
	CodeInvalidCredentials   Code = "INVALID_CREDENTIALS"
	CodeForbidden            Code = "FORBIDDEN"
	CodeMerchantsCannotBuy   Code = "MERCHANTS_CANNOT_BUY"
	CodeCSRF                 Code = "CSRF"
	CodeUnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	CodeCaptchaFailed        Code = "CAPTCHA_FAILED"
	CodeInvalidPurchaseToken Code = "INVALID_PURCHASE_TOKEN"
	CodeNotFound             Code = "NOT_FOUND"
	CodeUsernameTaken        Code = "USERNAME_TAKEN"
	CodeAlreadyPurchased     Code = "ALREADY_PURCHASED"
	CodeExpired              Code = "EXPIRED"
	CodeNotPayable           Code = "NOT_PAYABLE"
	CodeNotCancellable       Code = "NOT_CANCELLABLE"
	CodeSoldOut              Code = "SOLD_OUT"
	CodeSaleEnded            Code = "SALE_ENDED"
	CodeNotStarted           Code = "NOT_STARTED"
	CodePaused               Code = "PAUSED"
	CodeSaleStarted          Code = "SALE_STARTED"
	CodeQuantityTooLow       Code = "QUANTITY_TOO_LOW"
	CodeQueueNotDrained      Code = "QUEUE_NOT_DRAINED"
	CodeRateLimited          Code = "RATE_LIMITED"
	CodeUnavailable          Code = "UNAVAILABLE"
	CodeInternal             Code = "INTERNAL"
	CodeUseCheckout          Code = "USE_CHECKOUT"      // direct pay with a real payment provider: pay through its checkout
	CodeBadSignature         Code = "BAD_SIGNATURE"     // a provider webhook that does not verify
	CodeDrillRunning         Code = "DRILL_RUNNING"     // a fire drill is running (or being cleaned up) on the deployment
	CodeDrillNotNow          Code = "DRILL_NOT_NOW"     // a sale is live or starts within 30 minutes, or the merchant's last drill ended under 10 minutes ago
	CodePriceNotPayable      Code = "PRICE_NOT_PAYABLE" // an item price the payment provider cannot charge
	CodeDrawInProgress       Code = "DRAW_IN_PROGRESS"  // the sale's draw is undecided: what it gives cannot change
)

// Error is a failure the client is told about: a code from the contract, a message for people,
// and, for NOT_STARTED and RATE_LIMITED, when to try again.
type Error struct {
	Code       Code
	Message    string
	RetryAfter time.Duration
	OrderID    string // ALREADY_PURCHASED: the order the shopper holds
	// PRICE_NOT_PAYABLE: the provider's minimum in the sale's currency.
	MinimumCents int64
	Currency     string
	Err          error // the cause, logged, never shown
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unavailable wraps an infrastructure failure: the client gets 503 and nothing was done.
func Unavailable(err error) *Error {
	return &Error{Code: CodeUnavailable, Message: "the shop is busy or a component is down; nothing was reserved, try again", Err: err}
}

// ErrorCode returns the contract code of err, INTERNAL when err is not an *Error.
func ErrorCode(err error) Code {
	if e, ok := err.(*Error); ok {
		return e.Code // the refusals of the shopper's path: no errors.As
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// errBadCursor answers a cursor this server did not give out.
var errBadCursor = Errorf(CodeInvalidInput, "cursor is not one this server gave out; start from the first page without it")

// CursorFrom decodes a client's cursor with decode: nil for "" (the first page), errBadCursor for
// one this server did not give out.
func CursorFrom[C any](cursor string, decode func(string) (C, bool)) (*C, error) {
	if cursor == "" {
		return nil, nil
	}
	c, ok := decode(cursor)
	if !ok {
		return nil, errBadCursor
	}
	return &c, nil
}

// ErrPaused answers a purchase or a purchase token while the merchant has paused the sale.
var ErrPaused = &Error{Code: CodePaused, RetryAfter: 5 * time.Second,
	Message: "the merchant has paused this sale for a moment; nothing was reserved and your place is not lost: try again when it resumes"}

// ErrMerchantsCannotBuy answers a merchant's captcha, purchase token or purchase: a merchant's
// account sells, it never buys (its own sale or another's).
var ErrMerchantsCannotBuy = &Error{Code: CodeMerchantsCannotBuy,
	Message: "a merchant account cannot buy: log in with a shopper account to buy in a sale"}

// ErrSoldOut answers a purchase or a purchase token once every unit has been taken: the crowd's
// answer after a sell-out, which handlers.Error writes from bytes prepared once.
var ErrSoldOut = &Error{Code: CodeSoldOut, Message: "sold out: every unit has been taken"}

package loadgen

// Kind is what a latency measures.
type Kind int

const (
	KindToken    Kind = iota // POST purchase-token, send → answer
	KindPurchase             // POST purchase, send → answer
	KindDup                  // the second purchase of a double-click, send → answer
	KindArrival              // one arrival (shopper), scheduled time → its last answer
	NumKinds
)

// KindNames name the kinds in reports.
var KindNames = [NumKinds]string{"token", "purchase", "dup", "shopper"}

// Class is an outcome.
type Class int

const (
	Class200 Class = iota
	Class202
	Class409
	Class410
	Class425
	Class429
	Class4xx // any other 4xx (401, 403, 404, …)
	Class5xx
	ClassTimeout // no answer within -timeout, or not even sent before the phase's hard deadline
	ClassNetErr  // connection refused or reset, malformed answer
	NumClasses
)

// ClassNames name the outcomes in reports.
var ClassNames = [NumClasses]string{"200", "202", "409", "410", "425", "429", "4xx", "5xx", "timeout", "neterr"}

// ClassOf classifies an answer: its status, or the error that stood for it.
func ClassOf(status int, err error) Class {
	if err != nil {
		if isTimeout(err) {
			return ClassTimeout
		}
		return ClassNetErr
	}
	switch {
	case status == 200:
		return Class200
	case status == 202:
		return Class202
	case status == 409:
		return Class409
	case status == 410:
		return Class410
	case status == 425:
		return Class425
	case status == 429:
		return Class429
	case status >= 400 && status < 500:
		return Class4xx
	case status >= 500:
		return Class5xx
	}
	return Class4xx // 1xx/3xx and unexpected 2xx: not a contract answer
}

// IsError tells the outcomes that count against a server's stability: anything that is not
// one of the contract's answers to a shopper (200, 202, 409, 410).
func IsError(c Class) bool {
	switch c {
	case Class200, Class202, Class409, Class410:
		return false
	}
	return true
}

// CodeNames are the error codes the generator counts (from the {"error": CODE} bodies).
var CodeNames = []string{"SOLD_OUT", "ALREADY_PURCHASED", "SALE_ENDED", "NOT_STARTED", "INVALID_PURCHASE_TOKEN",
	"CAPTCHA_FAILED", "UNAUTHENTICATED", "RATE_LIMITED", "UNAVAILABLE", "INTERNAL", "NOT_FOUND", "other"}

const codeSoldOut = 0

func codeIndex(b []byte) int {
	switch string(b) {
	case "SOLD_OUT":
		return 0
	case "ALREADY_PURCHASED":
		return 1
	case "SALE_ENDED":
		return 2
	case "NOT_STARTED":
		return 3
	case "INVALID_PURCHASE_TOKEN":
		return 4
	case "CAPTCHA_FAILED":
		return 5
	case "UNAUTHENTICATED":
		return 6
	case "RATE_LIMITED":
		return 7
	case "UNAVAILABLE":
		return 8
	case "INTERNAL":
		return 9
	case "NOT_FOUND":
		return 10
	}
	return len(CodeNames) - 1
}

package store

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A replicated stream answers a publish whose message id another publish is storing with
// "duplicate message id is in process" (10158): the message is not refused, it is being stored.
// Taken for a failure, the purchase that sent it released its unit while the other send (the
// same attempt sent again from another instance) had queued it: on the clustered setup's double
// clicks (chaos 13) shoppers lost their orders. It is retried like a leader election.
func TestDuplicateInProcessIsRetried(t *testing.T) {
	inProcess := &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}
	if !transientJS(fmt.Errorf("publish o-1: %w", inProcess)) {
		t.Error("10158 duplicate message id is in process: not retried")
	}
	for _, code := range []jetstream.ErrorCode{10077 /* maximum messages exceeded */, 10060 /* expected stream does not match */} {
		if transientJS(&jetstream.APIError{Code: 400, ErrorCode: code}) {
			t.Errorf("refusal %d taken for a passing failure", code)
		}
	}
}

package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// scriptCalls sends concurrent calls of one script to Redis together: the calls that arrive
// while a round trip of them is in flight wait, and go in the next one, as one pipeline. In a
// rush thousands of purchases a second each make one reserve call; alone, each pays for taking
// a connection from the pool (its semaphore and its health check, a syscall), a write and a read
// of its own, on this side and on Redis's. Together they pay for these once a batch.
//
// No goroutine of its own: the caller that finds a slot free leads, sending what waits with its
// own call; when its round trip is back and calls are waiting, it hands the lead to the first of
// them (who sends them all) and returns. At most maxInFlight round trips are in flight at once,
// so one Redis that stops answering holds back those and the calls queued behind them, each of
// which still gives up with its own context while it is queued (nothing was sent for it then).
//
// Each call is still its own EVALSHA, atomic on Redis, answered by its own reply: a batch
// changes nothing of what the script does or answers. A connection that fails fails every call
// of its batch with the same error, as it would have failed each of them alone; go-redis retries
// a pipeline on the errors it retries a command on.
type scriptCalls struct {
	rdb    redis.UniversalClient
	script *redis.Script

	mu       sync.Mutex
	inFlight int           // round trips in flight (leaders)
	waiting  []*scriptCall // the calls for the next round trip

	trips atomic.Int64 // round trips made (a call sent again alone is one more)
}

// maxInFlight is how many round trips of one script may be in flight at once.
const maxInFlight = 4

// maxBatch bounds one round trip: a longer queue goes in several.
const maxBatch = 256

// scriptCall is one call of the script: its keys and arguments, then its reply.
type scriptCall struct {
	keys []string
	args []any
	val  []any
	err  error
	lead chan []*scriptCall // receives the batch this call leads, or nil once its reply is set
}

func newScriptCalls(rdb redis.UniversalClient, script *redis.Script) *scriptCalls {
	return &scriptCalls{rdb: rdb, script: script}
}

// run calls the script with keys and args and returns its reply (a Lua table) or the error.
func (s *scriptCalls) run(ctx context.Context, keys []string, args []any) ([]any, error) {
	c := &scriptCall{keys: keys, args: args}
	s.mu.Lock()
	if s.inFlight < maxInFlight {
		s.inFlight++
		s.mu.Unlock()
		s.lead(ctx, []*scriptCall{c})
		return c.val, c.err
	}
	c.lead = make(chan []*scriptCall, 1)
	s.waiting = append(s.waiting, c)
	s.mu.Unlock()
	select {
	case batch := <-c.lead:
		if batch != nil {
			s.lead(ctx, batch)
		}
		return c.val, c.err
	case <-ctx.Done():
		s.mu.Lock()
		for i, w := range s.waiting {
			if w == c { // still queued: nothing was sent for it
				s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
				s.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		s.mu.Unlock()
		// Taken into a batch already: its reply is coming, whatever the caller's context says.
		if batch := <-c.lead; batch != nil {
			s.lead(ctx, batch)
		}
		return c.val, c.err
	}
}

// lead sends batch (batch[0] is the leader's own call), then hands the lead to the first of
// the calls that queued meanwhile, or gives its slot back when none did. A batch of others'
// calls too is not cut short by the leader's context: they wait for its round trip. Should the
// send panic (the leader's handler recovers), the others of the batch are answered with an
// error and the queue still gets its leader.
func (s *scriptCalls) lead(ctx context.Context, batch []*scriptCall) {
	if len(batch) > 1 {
		ctx = context.WithoutCancel(ctx)
	}
	sent := false
	defer func() {
		for _, c := range batch[1:] {
			if !sent {
				c.err = errSenderFailed
			}
			c.lead <- nil // its reply is set
		}
		s.handOn()
	}()
	s.send(ctx, batch)
	sent = true
}

var errSenderFailed = errors.New("redis script call: the batch's sender failed")

// handOn passes a finished leader's slot to the first waiting call, with the calls waiting
// (maxBatch at most), or gives it back.
func (s *scriptCalls) handOn() {
	s.mu.Lock()
	if len(s.waiting) == 0 {
		s.inFlight--
		s.mu.Unlock()
		return
	}
	n := min(len(s.waiting), maxBatch)
	next := make([]*scriptCall, n)
	copy(next, s.waiting)
	s.waiting = append(s.waiting[:0], s.waiting[n:]...)
	s.mu.Unlock()
	next[0].lead <- next // the slot passes to it, with the batch
}

// send makes the round trip of batch and sets each call's reply. A batch of one is a plain
// EVALSHA (EVAL on NOSCRIPT), as every call was before batching. A larger one is a pipeline of
// EVALSHAs; a call that Redis answered with an error reply (NOSCRIPT after a restart or a
// failover, READONLY, LOADING, OOM…) is sent again alone, so it meets the client's own handling
// of that reply (EVAL, the retries with backoff) exactly as an unbatched call does. Sending the
// same attempt again is safe: the script answers it as it answered the first (lua/reserve.lua).
// A call that got no reply (the connection failed, a timeout) keeps that error, after the
// retries go-redis makes of the whole pipeline.
func (s *scriptCalls) send(ctx context.Context, batch []*scriptCall) {
	s.trips.Add(1)
	if len(batch) == 1 {
		c := batch[0]
		c.val, c.err = s.script.Run(ctx, s.rdb, c.keys, c.args...).Slice()
		return
	}
	cmds := make([]*redis.Cmd, len(batch))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = s.script.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	for i, c := range batch {
		var reply redis.Error
		if err := cmds[i].Err(); err != nil && errors.As(err, &reply) {
			s.trips.Add(1)
			c.val, c.err = s.script.Run(ctx, s.rdb, c.keys, c.args...).Slice()
			continue
		}
		c.val, c.err = cmds[i].Slice()
	}
}

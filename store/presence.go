package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrAnotherQueue is returned when an instance on this Redis hands its orders to another queue
// (another NATS: an embedded server of another instance, or another external NATS) than this
// one's. Two queues break the jobs' "the queue has drained": each instance judges by its own and
// would give back the units of the other's acknowledged orders.
var ErrAnotherQueue = errors.New("another flashsale instance on this Redis is live on another queue")

// queuesKey is a sorted set of the live instances of a deployment, one member per instance,
// "QUEUE|INSTANCE", scored by when it lapses (unix ms, Redis's clock).
const queuesKey = "flashsale:queues"

// presenceScript renews an instance's presence on its queue, unless an instance on another queue
// is live: then it answers that one's member and adds nothing (the first live stays, whoever
// comes or comes back second yields).
// KEYS[1] the queues key; ARGV[1] this instance's queue, ARGV[2] the instance, ARGV[3] ttl ms,
// ARGV[4] '1' to drop this instance instead.
var presenceScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[1] .. '|' .. ARGV[2]
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[1], me)
  return ''
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local prefix = ARGV[1] .. '|'
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, 1, #prefix) ~= prefix then
    redis.call('ZREM', KEYS[1], me)
    return m
  end
end
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + ttl, me)
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
return ''`)

// QueuePresence is an instance's record, in Redis, of the queue it hands orders to. Every
// instance of a deployment shares one Redis and must share one queue: an instance refuses to
// start beside a live instance on another queue (an external NATS beside an embedded one, or the
// reverse, or two different external ones), and one that finds such an instance live at a
// renewal (it was paused or cut off past its lease meanwhile) stops holding its presence.
type QueuePresence struct {
	rdb      redis.UniversalClient
	queue    string
	instance string
	ttl      time.Duration
	held     heldUntil
}

// JoinQueue records instance as live on queue (Queue.Identity), or returns ErrAnotherQueue
// naming the instance live on another queue.
func JoinQueue(ctx context.Context, rdb redis.UniversalClient, queue, instance string, ttl time.Duration) (*QueuePresence, error) {
	p := &QueuePresence{rdb: rdb, queue: queue, instance: instance, ttl: ttl}
	other, err := p.renew(ctx)
	if err != nil {
		return nil, err
	}
	if other != "" {
		return nil, fmt.Errorf("%w: %s (this instance's queue: %s)", ErrAnotherQueue, describeMember(other), queue)
	}
	return p, nil
}

func describeMember(m string) string {
	q, inst, _ := strings.Cut(m, "|")
	return fmt.Sprintf("instance %q on queue %s", inst, q)
}

// renew renews the presence; it answers the member of an instance live on another queue ("" if
// none), and records whether the presence is held.
func (p *QueuePresence) renew(ctx context.Context) (other string, err error) {
	began := time.Now()
	other, err = presenceScript.Run(ctx, p.rdb, []string{queuesKey}, p.queue, p.instance, p.ttl.Milliseconds(), "0").Text()
	if err != nil {
		return "", fmt.Errorf("queue presence: %w", err)
	}
	if other != "" {
		p.held.drop()
		return other, nil
	}
	p.held.renewed(began, p.ttl)
	return "", nil
}

// Held tells whether this instance's presence is renewed and no instance on another queue is
// live: only then may it sell and judge whether the queue has drained.
func (p *QueuePresence) Held() bool { return p.held.held() }

// Keep renews the presence every ttl/3 until ctx ends, then removes it. conflict is told each
// time an instance on another queue is found live (Held stays false until that one is gone).
func (p *QueuePresence) Keep(ctx context.Context, conflict func(other string)) {
	keepRenewing(ctx, p.ttl, func(ctx context.Context) (bool, string, error) {
		other, err := p.renew(ctx)
		if err != nil || other == "" {
			return false, "", err
		}
		return true, describeMember(other), nil
	}, p.drop, conflict)
}

// drop removes the presence now.
func (p *QueuePresence) drop(ctx context.Context) {
	p.held.drop()
	_ = presenceScript.Run(ctx, p.rdb, []string{queuesKey}, p.queue, p.instance, p.ttl.Milliseconds(), "1").Err()
}

// Identity names the queue this Queue hands orders to: the orders stream and when it was
// created. Every instance on one NATS (one server, or one cluster) sees the same; another NATS
// has its own stream, created at another moment.
func (q *Queue) Identity(ctx context.Context) (string, error) {
	s, err := q.js.Stream(ctx, OrdersStream)
	if err != nil {
		return "", fmt.Errorf("queue identity: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("queue identity: %w", err)
	}
	return OrdersStream + "@" + strconv.FormatInt(info.Created.UnixNano(), 36), nil
}

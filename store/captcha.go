package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Challenges keeps captcha answers in Redis, so any instance can check an answer another one
// rendered, and each answer can be checked once only.
type Challenges struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

// NewChallenges returns a store whose challenges expire after ttl.
func NewChallenges(rdb redis.UniversalClient, ttl time.Duration) *Challenges {
	return &Challenges{rdb: rdb, ttl: ttl}
}

func challengeKey(id string) string { return "captcha:" + id }

// Put stores the expected answer of challenge id, bound to binding (user and sale).
func (c *Challenges) Put(ctx context.Context, id, binding, answer string) error {
	if err := c.rdb.Set(ctx, challengeKey(id), binding+"|"+answer, c.ttl).Err(); err != nil {
		return fmt.Errorf("captcha put: %w", err)
	}
	return nil
}

// Take removes challenge id and returns what it held; ok is false if it does not exist (never
// issued, expired or already taken). A challenge is taken whatever the answer: one try each.
func (c *Challenges) Take(ctx context.Context, id string) (value string, ok bool, err error) {
	v, err := c.rdb.GetDel(ctx, challengeKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("captcha take: %w", err)
	}
	return v, true, nil
}

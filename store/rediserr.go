package store

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Errors are classified by their kind, never by where they were raised. Redis puts the kind
// first in every error answer ("OOM command not allowed…", "MISCONF …", "READONLY …"), and Redis 7
// keeps it first for an error raised inside a script, only appending where it was raised:
//
//	OOM command not allowed when used memory > 'maxmemory'. script: 4f1c…, on @user_script:12.
//	ERR user_script:12: attempt to compare nil with number script: 4f1c…, on @user_script:12.
//
// So "raised inside a script" says nothing about whose fault it is: a Redis out of memory, unable
// to persist or read-only refuses a script's write exactly as it refuses a plain SET.

// RedisErrorKind returns the kind of a Redis error answer (its first word: "OOM", "MISCONF",
// "READONLY", "WRONGTYPE", "ERR", …); ok is false when err carries no Redis answer (a network
// error, a timeout, a closed client).
func RedisErrorKind(err error) (kind string, ok bool) {
	var re redis.Error
	if !errors.As(err, &re) || errors.Is(err, redis.Nil) {
		return "", false
	}
	kind, _, _ = strings.Cut(re.Error(), " ")
	return kind, true
}

// IsAnswered reports whether err refuses the request itself, so the same request will always fail
// the same way and may count toward dead-lettering it: a Postgres data or constraint error
// (IsPermanent), or a Redis error that the same input always produces:
//   - WRONGTYPE: a key of the request holds the wrong kind of value;
//   - ERR raised by a script (a Lua runtime error, "ERR user_script:N: …", or a command the script
//     called refusing its arguments, "ERR value is not an integer … on @user_script:N.");
//   - a script's own error reply ("transfer: unknown op").
//
// Everything else is an outage, to be retried with backoff for as long as it lasts and never
// taken for a bad message, wherever it was raised: OOM (maxmemory with noeviction), MISCONF
// (cannot persist), READONLY (a replica, a failover under way), NOREPLICAS, LOADING, BUSY,
// MASTERDOWN, CLUSTERDOWN, TRYAGAIN, an ERR outside a script (too many clients), any kind not
// known here, and every error that is not an answer at all (unreachable, timeout).
func IsAnswered(err error) bool {
	kind, ok := RedisErrorKind(err)
	if !ok {
		return IsPermanent(err)
	}
	switch {
	case kind == "WRONGTYPE":
		return true
	case kind == "ERR":
		msg := redisMessage(err)
		return strings.Contains(msg, "@user_script") || strings.HasPrefix(msg, "ERR user_script:") ||
			strings.HasPrefix(msg, "ERR Error running script") // Redis 6 and older
	case strings.HasSuffix(kind, ":") && kind != "redis:" && kind == strings.ToLower(kind):
		return true // an error reply of one of our scripts ("transfer:")
	}
	return false
}

// redisErrorCause names a Redis error answer for metrics: "redis_oom", "redis_misconf",
// "redis_readonly", … for an outage (the kind, when it is one Redis uses), "redis" for an answer
// refusing the request (IsAnswered), "" when err is no Redis answer.
func redisErrorCause(err error) string {
	kind, ok := RedisErrorKind(err)
	if !ok {
		return ""
	}
	if IsAnswered(err) {
		return "redis"
	}
	if len(kind) > 12 || strings.IndexFunc(kind, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return "redis_other"
	}
	return "redis_" + strings.ToLower(kind)
}

func redisMessage(err error) string {
	var re redis.Error
	if errors.As(err, &re) {
		return re.Error()
	}
	return ""
}

package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// OpenRedis connects to Redis and checks it answers. A redis:// or rediss:// URL
// (redis://host:port/db) is one Redis; a redis-cluster:// or rediss-cluster:// URL
// (redis-cluster://host1:7000,host2:7001,host3:7002) is a Redis Cluster, reached through the
// seed nodes listed (any of them will do: the client learns the others from it). poolSize is the
// connection pool of the one Redis, or of each node of a cluster.
func OpenRedis(ctx context.Context, url string, poolSize int) (redis.UniversalClient, error) {
	if IsClusterURL(url) {
		return openCluster(ctx, url, poolSize)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
	opt.Protocol = protocolOf(url)
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// protocolOf is the RESP version to speak: 2 unless the URL asks otherwise (?protocol=3). Nothing
// here uses RESP3's push messages, and with RESP3 go-redis inspects every reply for them first:
// a few percent of a rush's CPU for nothing.
func protocolOf(url string) int {
	_, query, _ := strings.Cut(url, "?")
	for _, kv := range strings.Split(query, "&") {
		if v, ok := strings.CutPrefix(kv, "protocol="); ok && v == "3" {
			return 3
		}
	}
	return 2
}

// The URL schemes of a Redis Cluster (with TLS: rediss-cluster).
const (
	ClusterScheme    = "redis-cluster"
	ClusterTLSScheme = "rediss-cluster"
)

// IsClusterURL reports whether url names a Redis Cluster (redis-cluster:// or rediss-cluster://).
func IsClusterURL(url string) bool {
	return strings.HasPrefix(url, ClusterScheme+"://") || strings.HasPrefix(url, ClusterTLSScheme+"://")
}

// ParseClusterURL reads a Redis Cluster URL:
//
//	redis-cluster://[user:password@]host1:port1[,host2:port2...][/][?option=value&...]
//
// rediss-cluster:// is the same over TLS. The hosts are seed nodes; a port left out is 6379. The
// options are go-redis's cluster URL options (redis.ParseClusterURL: dial_timeout, pool_size,
// max_redirects, addr for more seeds, ...). A cluster has one database: no /db path.
func ParseClusterURL(raw string) (*redis.ClusterOptions, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != ClusterScheme && scheme != ClusterTLSScheme) {
		return nil, fmt.Errorf("redis cluster url: want %s://host1:port1,host2:port2,... or %s://...", ClusterScheme, ClusterTLSScheme)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	path, query, _ := strings.Cut(tail, "?")
	if strings.Contains(path, "#") || strings.Contains(query, "#") {
		return nil, errors.New("redis cluster url: a fragment (#) means nothing here")
	}
	if path != "" && path != "/" {
		return nil, fmt.Errorf("redis cluster url: %q: a Redis Cluster has only database 0, leave the path out", path)
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i+1], authority[i+1:]
	}
	seeds, err := clusterSeeds(hostlist)
	if err != nil {
		return nil, err
	}
	opt, err := redis.ParseClusterURL(goRedisClusterURL(scheme, userinfo, seeds, query))
	if err != nil {
		return nil, fmt.Errorf("redis cluster url: %w", err)
	}
	return opt, nil
}

// clusterSeeds reads a cluster URL's comma-separated seed nodes as host:port each (6379 when
// the port is left out).
func clusterSeeds(hostlist string) ([]string, error) {
	var seeds []string
	for _, h := range strings.Split(hostlist, ",") {
		seed, err := clusterSeed(strings.TrimSpace(h), hostlist)
		if err != nil {
			return nil, err
		}
		seeds = append(seeds, seed)
	}
	return seeds, nil
}

// clusterSeed checks one seed node, h (trimmed), of a cluster URL whose seeds are hostlist.
func clusterSeed(h, hostlist string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("redis cluster url: empty host in %q (want host1:port1,host2:port2,...)", hostlist)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port = strings.Trim(h, "[]"), "6379"
		} else {
			return "", fmt.Errorf("redis cluster url: seed %q: %w", h, err)
		}
	}
	if host == "" {
		return "", fmt.Errorf("redis cluster url: seed %q has no host", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("redis cluster url: seed %q: bad port %q", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// goRedisClusterURL writes a cluster URL as go-redis reads one: the first seed as the host, the
// others as addr options after the URL's own.
func goRedisClusterURL(scheme, userinfo string, seeds []string, query string) string {
	plain := "redis"
	if scheme == ClusterTLSScheme {
		plain = "rediss"
	}
	q := query
	for _, s := range seeds[1:] {
		if q != "" {
			q += "&"
		}
		q += "addr=" + neturl.QueryEscape(s)
	}
	u := plain + "://" + userinfo + seeds[0]
	if q != "" {
		u += "/?" + q
	}
	return u
}

// openCluster connects to a Redis Cluster and checks that every master answers.
func openCluster(ctx context.Context, url string, poolSize int) (redis.UniversalClient, error) {
	opt, err := ParseClusterURL(url)
	if err != nil {
		return nil, err
	}
	// Every command goes to the master of its slot: a replica may lag behind (asynchronous
	// replication), and the purchase path must never read a stale buyer or stock.
	opt.ReadOnly, opt.RouteByLatency, opt.RouteRandomly = false, false, false
	if opt.MaxRedirects == 0 {
		// MOVED/ASK while slots migrate (followed at once), and the retries of a call that got
		// no answer (with backoff; the slot map is re-read meanwhile, see reloadOnFailure).
		opt.MaxRedirects = 3
	}
	if opt.DialerRetries == 0 {
		// A dead node refuses at once: no use dialing it 5 times per try (go-redis's default)
		// before the retry that goes to the promoted replica. A purchase on a sale whose master
		// is down answers 503 after some 50 ms (on loopback) rather than seconds.
		opt.DialerRetries = 1
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize // per node
	}
	opt.Protocol = protocolOf(url)
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	// go-redis re-reads the slot map on MOVED/ASK, and otherwise once a minute: after a master
	// died and its replica took over, commands would keep going to the dead address for up to
	// that minute. A call to a node that fails makes it re-read the map at once
	// (reloadOnFailure), so the command's own retries (MaxRedirects, with backoff) reach the
	// promoted replica; the periodic re-read is shortened too.
	opt.ClusterStateReloadInterval = 10 * time.Second
	rdb := redis.NewClusterClient(opt)
	rdb.OnNewNode(func(node *redis.Client) { node.AddHook(reloadOnFailure{rdb}) })
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = rdb.ForEachMaster(pctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s: %w", m.Options().Addr, err)
		}
		return nil
	})
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis cluster %s: %w", strings.Join(opt.Addrs, ","), err)
	}
	return rdb, nil
}

// reloadOnFailure has a cluster client re-read the slot map (a lazy, rate-limited CLUSTER SLOTS)
// after a call that failed without an answer from Redis (a node unreachable, a timeout) or was
// refused with CLUSTERDOWN: the node may have died and a replica may be taking over its slots.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(err)
		return err
	}
}

func (h reloadOnFailure) check(err error) {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return
	}
	var re redis.Error
	if errors.As(err, &re) && !strings.HasPrefix(re.Error(), "CLUSTERDOWN") {
		return // an answer: the node is alive
	}
	h.c.ReloadState(context.Background())
}

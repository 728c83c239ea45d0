package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestParseClusterURL(t *testing.T) {
	cases := []clusterURLCase{
		{url: "redis-cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
			addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}},
		{url: "redis-cluster://a:7000", addrs: []string{"a:7000"}},
		{url: "redis-cluster://a/", addrs: []string{"a:6379"}},
		{url: "redis-cluster://:s3cret@a:1,b:2", addrs: []string{"a:1", "b:2"}, pw: "s3cret"},
		{url: "rediss-cluster://app:pw@a:1,[::1]:2", addrs: []string{"a:1", "[::1]:2"}, user: "app", pw: "pw", tls: true},
		{url: "redis-cluster://a:1,b:2?max_redirects=5&addr=c:3", addrs: []string{"a:1", "c:3", "b:2"},
			check: func(o *redis.ClusterOptions) bool { return o.MaxRedirects == 5 }},
	}
	for _, c := range cases {
		parsesClusterURL(t, c)
	}

	bad := map[string]string{
		"redis-cluster://":                     "empty host",
		"redis-cluster://a:1,,b:2":             "empty host",
		"redis-cluster://a:1/0":                "only database 0",
		"redis-cluster://a:99999":              "bad port",
		"redis-cluster://a:x":                  "bad port",
		"redis-cluster://:1":                   "no host",
		"redis-cluster://a:1?pool=3":           "unexpected option",
		"redis-cluster://a:1?dial_timeout=abc": "dial_timeout",
		"redis://a:1":                          "want redis-cluster://",
		"cluster://a:1":                        "want redis-cluster://",
	}
	for url, want := range bad {
		_, err := store.ParseClusterURL(url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseClusterURL(%q) = %v, want an error saying %q", url, err, want)
		}
	}
}

// clusterURLCase is a cluster URL and the options it must give: the seeds (the first one first),
// the user and password, TLS, and check, if set, for the others.
type clusterURLCase struct {
	url      string
	addrs    []string
	user, pw string
	tls      bool
	check    func(*redis.ClusterOptions) bool
}

// parsesClusterURL checks that c.url parses into the options c describes.
func parsesClusterURL(t *testing.T, c clusterURLCase) {
	t.Helper()
	o, err := store.ParseClusterURL(c.url)
	if err != nil {
		t.Errorf("ParseClusterURL(%q): %v", c.url, err)
		return
	}
	got := slices.Clone(o.Addrs)
	want := slices.Clone(c.addrs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ParseClusterURL(%q).Addrs = %v, want %v", c.url, o.Addrs, c.addrs)
	}
	if o.Addrs[0] != c.addrs[0] {
		t.Errorf("ParseClusterURL(%q): first seed %s, want %s", c.url, o.Addrs[0], c.addrs[0])
	}
	if o.Username != c.user || o.Password != c.pw {
		t.Errorf("ParseClusterURL(%q): user %q password %q, want %q %q", c.url, o.Username, o.Password, c.user, c.pw)
	}
	if (o.TLSConfig != nil) != c.tls {
		t.Errorf("ParseClusterURL(%q): TLS %v, want %v", c.url, o.TLSConfig != nil, c.tls)
	}
	if c.check != nil && !c.check(o) {
		t.Errorf("ParseClusterURL(%q): options not applied: %+v", c.url, o)
	}
}

func TestOpenRedisByScheme(t *testing.T) {
	ctx := context.Background()
	rs := testenv.Redis(t)

	single, err := store.OpenRedis(ctx, rs.URL(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := single.(*redis.Client); !ok {
		t.Errorf("OpenRedis(%s) = %T, want *redis.Client", rs.URL(), single)
	}
	single.Close()

	// A cluster URL naming a Redis that is not a cluster is refused at once, saying why.
	_, err = store.OpenRedis(ctx, "redis-cluster://"+rs.Addr, 4)
	if err == nil || !strings.Contains(err.Error(), "cluster support disabled") {
		t.Errorf("OpenRedis(redis-cluster:// on a plain redis) = %v, want a cluster support error", err)
	}
	// And a bad URL names what is wrong before any connection.
	if _, err := store.OpenRedis(ctx, "redis-cluster://a:1/3", 4); err == nil || !strings.Contains(err.Error(), "database 0") {
		t.Errorf("OpenRedis(bad cluster url) = %v", err)
	}
}

// RESP2 unless the URL asks for RESP3: nothing uses push messages, and go-redis looks for them
// before every RESP3 reply.
func TestRedisProtocolFromURL(t *testing.T) {
	rs := testenv.Redis(t)
	for query, want := range map[string]int{"": 2, "?protocol=3": 3, "?pool_size=9&protocol=3": 3, "?protocol=2": 2} {
		rdb, err := store.OpenRedis(context.Background(), "redis://"+rs.Addr+"/0"+query, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := rdb.(*redis.Client).Options().Protocol; got != want {
			t.Errorf("%q: protocol %d, want %d", query, got, want)
		}
		rdb.Close()
	}
}

package app

import (
	"strings"
	"testing"
)

func TestConfigNATSReplicas(t *testing.T) {
	cluster := "nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224"
	cases := []struct {
		name    string
		env     map[string]string
		want    int
		wantErr string
	}{
		{"default", nil, 1, ""},
		{"three on a cluster", map[string]string{"FLASHSALE_NATS_URL": cluster, "FLASHSALE_NATS_REPLICAS": "3"}, 3, ""},
		{"five on a cluster", map[string]string{"FLASHSALE_NATS_URL": cluster, "FLASHSALE_NATS_REPLICAS": "5"}, 5, ""},
		{"the embedded server keeps one copy", map[string]string{"FLASHSALE_NATS_REPLICAS": "3"}, 0, "FLASHSALE_NATS_REPLICAS=3 needs a NATS cluster"},
		{"zero", map[string]string{"FLASHSALE_NATS_URL": cluster, "FLASHSALE_NATS_REPLICAS": "0"}, 0, "FLASHSALE_NATS_REPLICAS"},
		{"six", map[string]string{"FLASHSALE_NATS_URL": cluster, "FLASHSALE_NATS_REPLICAS": "6"}, 0, "want 1 to 5"},
		{"not a number", map[string]string{"FLASHSALE_NATS_URL": cluster, "FLASHSALE_NATS_REPLICAS": "three"}, 0, "FLASHSALE_NATS_REPLICAS"},
	}
	for _, c := range cases {
		cfg, err := LoadConfig(func(k string) string { return c.env[k] })
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: got error %v, want none", c.name, err)
		case c.wantErr == "" && cfg.NATSReplicas != c.want:
			t.Errorf("%s: NATSReplicas = %d, want %d", c.name, cfg.NATSReplicas, c.want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: got error %v, want one mentioning %q", c.name, err, c.wantErr)
		}
	}
}

// A list of NATS servers, each with its credential, is logged with every credential hidden.
func TestMaskURLList(t *testing.T) {
	in := "nats://tok1@10.0.0.1:4222,nats://u:pw@10.0.0.2:4222,nats://10.0.0.3:4222"
	want := "nats://****@10.0.0.1:4222,nats://u:****@10.0.0.2:4222,nats://10.0.0.3:4222"
	if got := maskURL(in); got != want {
		t.Errorf("maskURL(%q) = %q, want %q", in, got, want)
	}
}

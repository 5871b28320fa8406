package minicloudcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

func TestParseListener(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    api.Listener
		wantErr bool
	}{
		{in: "TCP:80:30080", want: api.Listener{Protocol: "TCP", Port: 80, TargetPort: 30080}},
		{in: "udp:53", want: api.Listener{Protocol: "UDP", Port: 53, TargetPort: 53}},
		{in: "SCTP:80", wantErr: true},
		{in: "TCP", wantErr: true},
		{in: "TCP:0", wantErr: true},
		{in: "TCP:80:65536", wantErr: true},
		{in: "TCP:80:81:82", wantErr: true},
		{in: "TCP:http", wantErr: true},
	} {
		got, err := parseListener(tc.in)
		if (err != nil) != tc.wantErr || !cmp.Equal(got, tc.want) {
			t.Errorf("parseListener(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    api.Target
		wantErr bool
	}{
		{in: "i-000000000001", want: api.Target{InstanceID: "i-000000000001"}},
		{in: "10.0.0.1", want: api.Target{IP: "10.0.0.1"}},
		{in: "::1", want: api.Target{IP: "::1"}},
		{in: "node-1", wantErr: true},
		{in: "10.0.0.256", wantErr: true},
	} {
		got, err := parseTarget(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseHealthCheck(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    *api.HealthCheck
		wantErr bool
	}{
		{in: "", want: nil, wantErr: true}, // interval 3 without a check
		{in: "tcp", want: &api.HealthCheck{Protocol: "TCP", IntervalSeconds: 3}},
		{in: "TCP:8080", want: &api.HealthCheck{Protocol: "TCP", Port: 8080, IntervalSeconds: 3}},
		{in: "HTTP:10256:/healthz", want: &api.HealthCheck{Protocol: "HTTP", Port: 10256, Path: "/healthz", IntervalSeconds: 3}},
		{in: "HTTP::/ready:x", want: &api.HealthCheck{Protocol: "HTTP", Path: "/ready:x", IntervalSeconds: 3}},
		{in: "TCP:80:/x", wantErr: true},
		{in: "HTTP:80:x", wantErr: true},
		{in: "ICMP", wantErr: true},
		{in: "HTTP:99999", wantErr: true},
	} {
		got, err := parseHealthCheck(tc.in, 3)
		if tc.in == "" {
			if got, err := parseHealthCheck("", 0); got != nil || err != nil {
				t.Errorf(`parseHealthCheck("", 0) = %+v, %v; want no check`, got, err)
			}
		}
		if (err != nil) != tc.wantErr || !cmp.Equal(got, tc.want) {
			t.Errorf("parseHealthCheck(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseTags(t *testing.T) {
	for _, tc := range []struct {
		in        []string
		allowBare bool
		want      map[string]string
		wantErr   bool
	}{
		{in: nil, want: nil},
		{in: []string{"a=1", "b=x=y"}, want: map[string]string{"a": "1", "b": "x=y"}},
		{in: []string{"a"}, wantErr: true},
		{in: []string{"a"}, allowBare: true, want: map[string]string{"a": ""}},
		{in: []string{"=1"}, allowBare: true, wantErr: true},
	} {
		got, err := parseTags(tc.in, tc.allowBare)
		if (err != nil) != tc.wantErr || !cmp.Equal(got, tc.want) {
			t.Errorf("parseTags(%q, %v) = %v, %v; want %v, error %v", tc.in, tc.allowBare, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseFlags checks that flag parsers never crash and accept only
// values the API accepts too.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"TCP:80:30080", "udp:53", "HTTP:10256:/healthz", "i-1", "10.0.0.1", "TCP::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if l, err := parseListener(s); err == nil {
			if l.Port < 1 || l.Port > 65535 || l.TargetPort < 1 || l.TargetPort > 65535 || (l.Protocol != "TCP" && l.Protocol != "UDP") {
				t.Fatalf("parseListener(%q) accepted %+v", s, l)
			}
		}
		if hc, err := parseHealthCheck(s, 0); err == nil && hc != nil {
			if (hc.Protocol != "TCP" && hc.Protocol != "HTTP") || hc.Port < 0 || hc.Port > 65535 || (hc.Path != "" && hc.Path[0] != '/') {
				t.Fatalf("parseHealthCheck(%q) accepted %+v", s, hc)
			}
		}
		if tg, err := parseTarget(s); err == nil && (tg.IP == "") == (tg.InstanceID == "") {
			t.Fatalf("parseTarget(%q) accepted %+v", s, tg)
		}
	})
}

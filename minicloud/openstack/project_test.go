package openstack

import (
	"net/netip"
	"slices"
	"testing"
)

// TestCommonSources: the source ranges of a load balancer are those every
// listener allows, so listeners updated one by one never let in a source
// one of them refuses.
func TestCommonSources(t *testing.T) {
	p := func(cs ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, c := range cs {
			out = append(out, netip.MustParsePrefix(c))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		sets [][]netip.Prefix
		want []string
	}{
		{"none", [][]netip.Prefix{nil, nil}, nil},
		{"one restricts", [][]netip.Prefix{nil, p("10.0.0.0/8")}, []string{"10.0.0.0/8"}},
		{"same", [][]netip.Prefix{p("10.0.0.0/8"), p("10.0.0.0/8")}, []string{"10.0.0.0/8"}},
		{"narrower wins", [][]netip.Prefix{p("10.0.0.0/8", "192.168.0.0/16"), p("10.1.0.0/16")}, []string{"10.1.0.0/16"}},
		{"disjoint", [][]netip.Prefix{p("10.0.0.0/8"), p("192.168.0.0/16")}, denyAll},
	} {
		if got := commonSources(tc.sets); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProjectMonitorPort: members' monitor_port is the health check's
// port; members monitored on different ports cannot be projected.
func TestProjectMonitorPort(t *testing.T) {
	lb := &lbRecord{ID: "lb", Listeners: []listener{{ID: "l", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p"}},
		Pools: []pool{{ID: "p", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN", ListenerID: "l",
			Members: []member{{Address: "10.0.0.1", ProtocolPort: 30080, MonitorPort: 31000}, {Address: "10.0.0.2", ProtocolPort: 30080, MonitorPort: 31000}},
			Monitor: &monitor{Type: "HTTP", Delay: 5, URLPath: "/healthz"}}}}
	spec, err := project(lb, nil)
	if err != nil || spec.HealthCheck == nil || spec.HealthCheck.Port != 31000 || spec.HealthCheck.Path != "/healthz" || spec.Listeners[0].TargetPort != 30080 {
		t.Fatalf("projection %+v (health %+v), %v", spec, spec.HealthCheck, err)
	}
	lb.Pools[0].Members[1].MonitorPort = 0
	if _, err := project(lb, nil); err == nil {
		t.Error("members on different monitor ports were projected")
	}
}

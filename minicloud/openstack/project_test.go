package openstack

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// TestProjectPerListener: each listener carries its own pool's members and
// its own allowed_cidrs, as Octavia keeps them; a listener whose pool has
// fewer members takes nothing away from another listener; listeners whose
// pools are empty, and a bare load balancer, project to no listener.
func TestProjectPerListener(t *testing.T) {
	mem := func(addrs ...string) []member {
		var out []member
		for _, a := range addrs {
			out = append(out, member{Address: a, ProtocolPort: 30080})
		}
		return out
	}
	lb := &lbRecord{ID: "lb",
		Listeners: []listener{
			{ID: "l1", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p1"},
			{ID: "l2", Protocol: "TCP", ProtocolPort: 81, DefaultPoolID: "p2", AllowedCIDRs: []string{"10.0.0.0/8"}},
			{ID: "l3", Protocol: "UDP", ProtocolPort: 82, DefaultPoolID: "p3"},
		},
		Pools: []pool{
			{ID: "p1", Protocol: "TCP", ListenerID: "l1", Members: mem("10.0.0.2", "10.0.0.1")},
			{ID: "p2", Protocol: "TCP", ListenerID: "l2", Members: mem("10.0.0.1")},
			{ID: "p3", Protocol: "UDP", ListenerID: "l3"},
		}}
	spec, err := project(lb, map[string]string{"10.0.0.1": "i-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Listener{
		{Protocol: "TCP", Port: 80, TargetPort: 30080, Targets: []api.Target{{InstanceID: "i-1"}, {IP: "10.0.0.2"}}},
		{Protocol: "TCP", Port: 81, TargetPort: 30080, Targets: []api.Target{{InstanceID: "i-1"}}, SourceRanges: []string{"10.0.0.0/8"}},
	}
	if !reflect.DeepEqual(spec.Listeners, want) {
		t.Errorf("listeners %+v, want %+v", spec.Listeners, want)
	}
	if wantT := []api.Target{{InstanceID: "i-1"}, {IP: "10.0.0.2"}}; !slices.Equal(spec.Targets, wantT) || spec.SourceRanges != nil {
		t.Errorf("targets %v, source ranges %v; want %v and none", spec.Targets, spec.SourceRanges, wantT)
	}
	bare, err := project(&lbRecord{ID: "bare"}, nil)
	if err != nil || bare.Listeners == nil || len(bare.Listeners) != 0 || len(bare.Targets) != 0 {
		t.Errorf("bare load balancer: %+v, %v; want no listener and no target", bare, err)
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

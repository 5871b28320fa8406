package api

import "testing"

func TestTargetsDigest(t *testing.T) {
	a, b, ip := Target{InstanceID: "i-a"}, Target{InstanceID: "i-b"}, Target{IP: "192.0.2.1"}
	base := TargetsDigest([]Target{a, b, ip}, nil, nil)
	same := []struct {
		name string
		got  string
	}{
		{"another order", TargetsDigest([]Target{ip, b, a}, nil, nil)},
		{"a target twice", TargetsDigest([]Target{a, b, ip, a}, nil, nil)},
		{"listeners without own targets", TargetsDigest([]Target{a, b, ip}, []Listener{{Protocol: ProtocolTCP, Port: 80}}, nil)},
	}
	for _, tc := range same {
		if tc.got != base {
			t.Errorf("%s: digest %s, want %s", tc.name, tc.got, base)
		}
	}
	differ := []struct {
		name string
		got  string
	}{
		{"a target less", TargetsDigest([]Target{a, b}, nil, nil)},
		{"an instance for an address", TargetsDigest([]Target{a, b, {InstanceID: "192.0.2.1"}}, nil, nil)},
		{"a listener's own target", TargetsDigest([]Target{a, b, ip}, []Listener{{Protocol: ProtocolTCP, Port: 80, Targets: []Target{a}}}, nil)},
		{"a backend pool", TargetsDigest([]Target{a, b, ip}, nil, []string{"pool"})},
		{"a pool named as an instance", TargetsDigest([]Target{b, ip}, nil, []string{"i-a"})},
	}
	for _, tc := range differ {
		if tc.got == base {
			t.Errorf("%s: digest %s equals the base's", tc.name, tc.got)
		}
	}
	if d := TargetsDigest(nil, []Listener{{Protocol: ProtocolTCP, Port: 80, Targets: []Target{a}}}, nil); d == TargetsDigest(nil, []Listener{{Protocol: ProtocolTCP, Port: 81, Targets: []Target{a}}}, nil) {
		t.Errorf("a listener's target on another port: the same digest %s", d)
	}
}

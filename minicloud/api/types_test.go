package api

import (
	"slices"
	"testing"
)

func TestServedTargets(t *testing.T) {
	a, b, c := Target{InstanceID: "i-a"}, Target{IP: "192.0.2.1"}, Target{InstanceID: "i-c"}
	for _, tc := range []struct {
		name string
		lb   LoadBalancer
		want []Target
	}{
		{"no listener", LoadBalancer{Targets: []Target{a, b}}, nil},
		{"listeners without own targets", LoadBalancer{Targets: []Target{a, b}, Listeners: []Listener{{Port: 80}}}, []Target{a, b}},
		{"own targets, in the load balancer's order", LoadBalancer{Targets: []Target{a, b, c},
			Listeners: []Listener{{Port: 80, Targets: []Target{c}}, {Port: 81, Targets: []Target{a}}}}, []Target{a, c}},
		{"one listener with all", LoadBalancer{Targets: []Target{a, b, c},
			Listeners: []Listener{{Port: 80, Targets: []Target{c}}, {Port: 81}}}, []Target{a, b, c}},
	} {
		if got := tc.lb.ServedTargets(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ServedTargets() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAdmittedSources(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lb     LoadBalancer
		want   []string
		wantOK bool
	}{
		{"no listener", LoadBalancer{SourceRanges: []string{"10.0.0.0/8"}}, []string{"10.0.0.0/8"}, true},
		{"any source", LoadBalancer{Listeners: []Listener{{Port: 80}}}, []string{}, true},
		{"the load balancer's, sorted", LoadBalancer{SourceRanges: []string{"192.0.2.0/24", "10.0.0.0/8"}, Listeners: []Listener{{Port: 80}, {Port: 81}}},
			[]string{"10.0.0.0/8", "192.0.2.0/24"}, true},
		{"listeners' own, equal", LoadBalancer{Listeners: []Listener{
			{Port: 80, SourceRanges: []string{"10.0.0.0/8", "192.0.2.0/24"}},
			{Port: 81, SourceRanges: []string{"192.0.2.0/24", "10.0.0.0/8"}}}}, []string{"10.0.0.0/8", "192.0.2.0/24"}, true},
		{"own replaces the load balancer's", LoadBalancer{SourceRanges: []string{"10.0.0.0/8"}, Listeners: []Listener{
			{Port: 80, SourceRanges: []string{"192.0.2.0/24"}}}}, []string{"192.0.2.0/24"}, true},
		{"listeners differ", LoadBalancer{Listeners: []Listener{
			{Port: 80, SourceRanges: []string{"10.0.0.0/8"}}, {Port: 81}}}, nil, false},
		{"own and inherited differ", LoadBalancer{SourceRanges: []string{"10.0.0.0/8"}, Listeners: []Listener{
			{Port: 80}, {Port: 81, SourceRanges: []string{"192.0.2.0/24"}}}}, nil, false},
	} {
		got, ok := tc.lb.AdmittedSources()
		if ok != tc.wantOK || !slices.Equal(got, tc.want) {
			t.Errorf("%s: AdmittedSources() = %v, %v, want %v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

package minicloud

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

func TestInstanceIDOf(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"minicloud://i-000000000001", "i-000000000001", true},
		{"minicloud://", "", false},
		{"minicloud:///i-1", "", false},
		{"minicloud://east/i-1", "", false},
		{"aws:///us-east-1a/i-1", "", false},
		{"i-1", "", false},
		{"", "", false},
	} {
		got, err := InstanceIDOf(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("InstanceIDOf(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tc.in) {
			t.Errorf("InstanceIDOf(%q) error %q does not name the provider ID", tc.in, err)
		}
	}
}

// FuzzInstanceIDOf checks that every accepted provider ID round-trips.
func FuzzInstanceIDOf(f *testing.F) {
	for _, s := range []string{"minicloud://i-1", "minicloud://", "minicloud:///x", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := InstanceIDOf(s)
		if err != nil {
			return
		}
		if id == "" || ProviderID(id) != s {
			t.Fatalf("InstanceIDOf(%q) = %q does not round-trip", s, id)
		}
	})
}

func TestLoadBalancerName(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{UID: "0b6e1f3a-5c1e-4c9b-9d7e-2f1a3b4c5d6e"}}
	if got, want := LoadBalancerName(svc), "a0b6e1f3a5c1e4c9b9d7e2f1a3b4c5d6"; got != want {
		t.Errorf("LoadBalancerName = %q, want %q", got, want)
	}
}

func TestSpecOf(t *testing.T) {
	base := func(mutate ...func(*v1.Service)) *v1.Service {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-1"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{
				{Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
				{Port: 80, NodePort: 30080}, // protocol defaults to TCP
			}},
		}
		for _, m := range mutate {
			m(svc)
		}
		return svc
	}
	listeners := []api.Listener{{Protocol: "UDP", Port: 53, TargetPort: 30053}, {Protocol: "TCP", Port: 80, TargetPort: 30080}}
	tags := map[string]string{TagCluster: "c", TagServiceNamespace: "ns", TagServiceName: "web", TagServiceUID: "u-1"}
	for _, tc := range []struct {
		name    string
		svc     *v1.Service
		want    api.LoadBalancerSpec
		wantErr string
	}{
		{"TCP health check on the first TCP node port", base(), api.LoadBalancerSpec{Name: "au1", Tags: tags, Listeners: listeners,
			HealthCheck: &api.HealthCheck{Protocol: "TCP", Port: 30080}}, ""},
		{"UDP only: no health check", base(func(s *v1.Service) { s.Spec.Ports = s.Spec.Ports[:1] }),
			api.LoadBalancerSpec{Name: "au1", Tags: tags, Listeners: listeners[:1]}, ""},
		{"Local: HTTP health check", base(func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32000
		}), api.LoadBalancerSpec{Name: "au1", Tags: tags, Listeners: listeners,
			HealthCheck: &api.HealthCheck{Protocol: "HTTP", Port: 32000, Path: "/healthz"}}, ""},
		{"source ranges, host bits cleared, sorted", base(func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.1.2.3/8", "192.168.0.0/16"} }),
			api.LoadBalancerSpec{Name: "au1", Tags: tags, Listeners: listeners, HealthCheck: &api.HealthCheck{Protocol: "TCP", Port: 30080},
				SourceRanges: []string{"10.0.0.0/8", "192.168.0.0/16"}}, ""},
		{"allow all is no restriction", base(func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"0.0.0.0/0"} }),
			api.LoadBalancerSpec{Name: "au1", Tags: tags, Listeners: listeners, HealthCheck: &api.HealthCheck{Protocol: "TCP", Port: 30080}}, ""},
		{"no ports", base(func(s *v1.Service) { s.Spec.Ports = nil }), api.LoadBalancerSpec{}, "spec.ports"},
		{"SCTP", base(func(s *v1.Service) { s.Spec.Ports[1].Protocol = v1.ProtocolSCTP }), api.LoadBalancerSpec{}, "spec.ports[1].protocol"},
		{"no node port", base(func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }), api.LoadBalancerSpec{}, "spec.ports[0].nodePort"},
		{"loadBalancerIP", base(func(s *v1.Service) { s.Spec.LoadBalancerIP = "1.2.3.4" }), api.LoadBalancerSpec{}, "spec.loadBalancerIP"},
		{"bad source range annotation", base(func(s *v1.Service) {
			s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "10.0.0.0/33"}
		}), api.LoadBalancerSpec{}, v1.AnnotationLoadBalancerSourceRangesKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := specOf("c", tc.svc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("specOf error = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("specOf (-want +got):\n%s", diff)
			}
		})
	}
	_, err := specOf("c", base(func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }))
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("SCTP error %v does not wrap ErrUnsupported", err)
	}
}

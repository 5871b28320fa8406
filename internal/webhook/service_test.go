package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/pkg/annotations"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// TestCapabilityProblems: each setting a provider declares it cannot
// implement is one problem naming its field and what would be accepted; a
// provider that declares it can is not in the way.
func TestCapabilityProblems(t *testing.T) {
	tcpOnly := stratus.LoadBalancerCapabilities{Protocols: []v1.Protocol{v1.ProtocolTCP}, MaxPorts: 2}
	everything := stratus.LoadBalancerCapabilities{
		Protocols: []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}, MixedProtocols: true,
		SourceRanges: true, ProxyProtocol: true, WithoutNodePorts: true, LoadBalancerIP: true,
	}
	no := false
	for _, tc := range []struct {
		name   string
		modify func(*v1.Service)
		want   []Problem // from tcpOnly; everything wants none
	}{
		{"valid", func(*v1.Service) {}, nil},
		{"protocol and mix", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolUDP, Port: 53})
		}, []Problem{
			{"spec.ports[1].protocol", `UDP is not supported by provider "p" (supported: TCP)`},
			{"spec.ports", `provider "p" cannot mix protocols (TCP and UDP) on one load balancer: use one protocol per Service`},
		}},
		{"too many ports", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Port: 81}, v1.ServicePort{Port: 82})
		}, []Problem{{"spec.ports", `3 ports; provider "p" serves at most 2 on one load balancer`}}},
		{"source ranges", func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			[]Problem{{"spec.loadBalancerSourceRanges", `provider "p" cannot restrict client addresses: remove the field (a NetworkPolicy can restrict them)`}}},
		{"source ranges annotation", func(s *v1.Service) {
			s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "10.0.0.0/8"}
		}, []Problem{{"metadata.annotations[" + v1.AnnotationLoadBalancerSourceRangesKey + "]", `provider "p" cannot restrict client addresses: remove the annotation (a NetworkPolicy can restrict them)`}}},
		{"proxy protocol", func(s *v1.Service) { s.Annotations = map[string]string{annotations.LBProxyProtocol.Name: "true"} },
			[]Problem{{"metadata.annotations[" + annotations.LBProxyProtocol.Name + "]", `provider "p" cannot send the PROXY protocol (ipMode: Proxy): remove the annotation or set it to false`}}},
		{"proxy protocol off", func(s *v1.Service) { s.Annotations = map[string]string{annotations.LBProxyProtocol.Name: "false"} }, nil},
		{"no node ports", func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = &no },
			[]Problem{{"spec.allocateLoadBalancerNodePorts", `false is not supported by provider "p": its load balancers forward to node ports; remove the field or set it to true`}}},
		{"address", func(s *v1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1" },
			[]Problem{{"spec.loadBalancerIP", `provider "p" allocates load balancer addresses itself: remove the field`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80}}}}
			tc.modify(svc)
			if diff := cmp.Diff(tc.want, capabilityProblems("p", tcpOnly, svc)); diff != "" {
				t.Errorf("TCP-only provider (-want +got):\n%s", diff)
			}
			if got := capabilityProblems("p", everything, svc); len(got) != 0 {
				t.Errorf("a provider that can do everything: %v", got)
			}
		})
	}
}

// TestAnnotationProblems: the registry's complaints become one problem per
// annotation, under its field, with long values shortened.
func TestAnnotationProblems(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		annotations.LBAlgorithm.Name:                  "least-connections",
		annotations.Prefix + "load-balancer-algoritm": "x",
		"example.com/other":                           "anything",
	}}}
	want := []Problem{
		{"metadata.annotations[" + annotations.LBAlgorithm.Name + "]", `invalid value "least-connections": not one of round-robin, source-ip`},
		{"metadata.annotations[" + annotations.Prefix + "load-balancer-algoritm]", "unknown stratus annotation; did you mean " + annotations.LBAlgorithm.Name + "?"},
	}
	if diff := cmp.Diff(want, annotationProblems(svc)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

package devenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDesiredPorts(t *testing.T) {
	svc := func(name string, typ corev1.ServiceType, hc int32, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       corev1.ServiceSpec{Type: typ, Ports: ports, HealthCheckNodePort: hc},
		}
	}
	tcp := func(port, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Port: port, NodePort: nodePort, Protocol: corev1.ProtocolTCP}
	}
	tests := []struct {
		name string
		svcs []*corev1.Service
		want map[int]portRoute
	}{
		{"none", nil, map[int]portRoute{}},
		{"NodePort Service is not served", []*corev1.Service{svc("a", corev1.ServiceTypeNodePort, 0, tcp(80, 30001))}, map[int]portRoute{}},
		{"LB Service ports", []*corev1.Service{svc("a", corev1.ServiceTypeLoadBalancer, 0, tcp(80, 30001), tcp(443, 30002))}, map[int]portRoute{
			30001: {kind: trafficPort, namespace: "ns", name: "a", servicePort: 80},
			30002: {kind: trafficPort, namespace: "ns", name: "a", servicePort: 443},
		}},
		{"UDP and unallocated ports skipped", []*corev1.Service{svc("a", corev1.ServiceTypeLoadBalancer, 0,
			corev1.ServicePort{Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP}, tcp(80, 0))}, map[int]portRoute{}},
		{"health check node port", []*corev1.Service{svc("a", corev1.ServiceTypeLoadBalancer, 32000, tcp(80, 30001))}, map[int]portRoute{
			30001: {kind: trafficPort, namespace: "ns", name: "a", servicePort: 80},
			32000: {kind: healthPort, namespace: "ns", name: "a"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := desiredPorts(tt.svcs)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(portRoute{})); diff != "" {
				t.Errorf("desiredPorts (-want +got):\n%s", diff)
			}
		})
	}
}

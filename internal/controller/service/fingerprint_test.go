package service

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFingerprint(t *testing.T) {
	base := func() *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 3, Annotations: map[string]string{"a": "1", "b": "2"}, Labels: map[string]string{"l": "1"}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80}}},
		}
	}
	fp := fingerprint("p", base())
	if fp == "" || fp != fingerprint("p", base()) {
		t.Fatalf("fingerprint not deterministic: %q", fp)
	}
	changes := []struct {
		desc     string
		provider string
		svc      func(*v1.Service)
		same     bool
	}{
		{desc: "label", svc: func(s *v1.Service) { s.Labels["l"] = "2" }, same: true},
		{desc: "status", svc: func(s *v1.Service) { s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "1.1.1.1"}} }, same: true},
		{desc: "selector", svc: func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "x"} }, same: true},
		{desc: "generation", svc: func(s *v1.Service) { s.Generation++ }, same: true},
		{desc: "annotation", svc: func(s *v1.Service) { s.Annotations["a"] = "x" }},
		{desc: "port", svc: func(s *v1.Service) { s.Spec.Ports[0].Port = 81 }},
		{desc: "UID", svc: func(s *v1.Service) { s.UID = "u2" }},
		{desc: "provider", provider: "q"},
	}
	for _, ch := range changes {
		svc, prov := base(), "p"
		if ch.svc != nil {
			ch.svc(svc)
		}
		if ch.provider != "" {
			prov = ch.provider
		}
		if got := fingerprint(prov, svc) == fp; got != ch.same {
			t.Errorf("%s: same fingerprint = %v, want %v", ch.desc, got, ch.same)
		}
	}
}

func TestAdoptable(t *testing.T) {
	ready := func() *v1.Service {
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{UID: "u1", Finalizers: []string{Finalizer}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
			Status:     v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "1.1.1.1"}}}},
		}
		s.Status.Conditions = []metav1.Condition{readyCondition(1, fingerprint("p", s))}
		return s
	}
	tests := []struct {
		desc string
		fn   func(*v1.Service)
		want bool
	}{
		{"ensured from this configuration", func(*v1.Service) {}, true},
		{"no finalizer", func(s *v1.Service) { s.Finalizers = nil }, false},
		{"no ingress", func(s *v1.Service) { s.Status.LoadBalancer.Ingress = nil }, false},
		{"selector changed since", func(s *v1.Service) { s.Spec.Selector = map[string]string{"a": "b"} }, true},
		{"provisioning", func(s *v1.Service) { s.Status.Conditions[0].Reason = ReasonProvisioning }, false},
		{"no condition", func(s *v1.Service) { s.Status.Conditions = nil }, false},
		{"other annotations", func(s *v1.Service) { s.Annotations = map[string]string{"x": "y"} }, false},
	}
	for _, tt := range tests {
		s := ready()
		tt.fn(s)
		if got := adoptable(s, fingerprint("p", s)); got != tt.want {
			t.Errorf("%s: adoptable = %v, want %v", tt.desc, got, tt.want)
		}
	}
	if adoptable(ready(), fingerprint("q", ready())) {
		t.Error("adoptable with another provider")
	}
}

package service

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// upstream behavior B12: cleanup after a type change away from LoadBalancer writes the
// Service exactly twice: the finalizer removal, then the status (ingress and
// Ready condition). Counted as the Service's modifications seen by a watch
// from the user's update on, until no more arrive for a while.
func TestCleanupWritesTwice(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	h.createService(lbService("c"))
	h.waitIngress("c", 30*time.Second)
	h.waitCondition("c", ReasonReady, 10*time.Second)

	changed := h.updateService("c", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	})
	w, err := h.cs.CoreV1().Services(h.ns).Watch(h.ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", "c").String(),
		ResourceVersion: changed.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var writes []string
	done := false
	quiet := time.NewTimer(30 * time.Second) // bound for the cleanup itself
	defer quiet.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if ev.Type != watch.Modified {
				t.Fatalf("unexpected %s event", ev.Type)
			}
			s := ev.Object.(*v1.Service)
			hasFin := slices.Contains(s.Finalizers, Finalizer)
			hasCond := meta.FindStatusCondition(s.Status.Conditions, ConditionLoadBalancerReady) != nil
			writes = append(writes, describeWrite(hasFin, hasCond))
			done = !hasFin && !hasCond && len(s.Status.LoadBalancer.Ingress) == 0
			if done {
				// Any further write would show within the settle time.
				quiet.Reset(2 * time.Second)
			}
		case <-quiet.C:
			if !done {
				t.Fatalf("cleanup not finished; writes so far: %v", writes)
			}
			want := []string{"finalizer removed, condition kept", "finalizer removed, condition cleared"}
			if !slices.Equal(writes, want) {
				t.Errorf("writes after the type change: %v, want exactly %v", writes, want)
			}
			return
		}
	}
}

func describeWrite(hasFinalizer, hasCondition bool) string {
	f, c := "finalizer kept", "condition kept"
	if !hasFinalizer {
		f = "finalizer removed"
	}
	if !hasCondition {
		c = "condition cleared"
	}
	return f + ", " + c
}

// A slow backend update and a Service change at the same time: the update
// must not write its older view of the Service after the Ensure of the newer
// one (a provider's update often rewrites the whole load balancer).
func TestSlowBackendUpdateDoesNotOverwriteNewerEnsure(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	svc := h.createService(lbService("race"))
	h.waitIngress("race", 30*time.Second)
	c.set(func(c *testCloud) { c.updateDelay = 2 * time.Second })

	h.createNodes(1, 2) // a backend update starts, and takes 2s
	h.eventually(10*time.Second, "the backend update under way", func() (bool, error) {
		return c.count("update-started") > 0, nil
	})
	h.updateService("race", func(s *v1.Service) { s.Spec.Ports[0].Port = 8080 })

	h.eventually(30*time.Second, "the load balancer written from the changed Service, with both nodes", func() (bool, error) {
		lb, ok := c.lb(svc)
		return ok && lb.lastWrite != nil && lb.lastWrite.Spec.Ports[0].Port == 8080 && len(lb.hosts) == 2, nil
	})
	// Nothing older lands afterwards.
	h.consistently(3*time.Second, "the last write stays the newest Service", func() bool {
		lb, _ := c.lb(svc)
		return lb.lastWrite.Spec.Ports[0].Port == 8080 && len(lb.hosts) == 2
	})
}

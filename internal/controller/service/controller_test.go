package service

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	"github.com/stratus-ccm/stratus/pkg/echo"
)

// upstream behavior B11: a class-less LB Service gets the finalizer before the
// cloud is called, then its status, in exactly two writes that touch only
// finalizers and status; the events follow upstream.
func TestEnsureNewLoadBalancer(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 2)

	// Watch the Service from its creation to count every write.
	created := h.createService(lbService("web"))
	w, err := h.cs.CoreV1().Services(h.ns).Watch(h.ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=web", ResourceVersion: created.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	svc := h.waitIngress("web", 30*time.Second)
	if !slices.Contains(svc.Finalizers, Finalizer) {
		t.Errorf("finalizers = %v, want %s", svc.Finalizers, Finalizer)
	}
	lb, ok := c.lb(svc)
	if !ok {
		t.Fatal("no load balancer in the cloud")
	}
	if !slices.Contains(lb.lastSvc.Finalizers, Finalizer) {
		t.Errorf("EnsureLoadBalancer saw finalizers %v: the finalizer must be added before the cloud is called", lb.lastSvc.Finalizers)
	}
	want := []v1.LoadBalancerIngress{{IP: lb.ip, IPMode: ptr.To(v1.LoadBalancerIPModeVIP), Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	if diff := cmp.Diff(want, svc.Status.LoadBalancer.Ingress); diff != "" {
		t.Errorf("ingress (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(h.names(0, 1), lb.hosts); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
	cond := meta.FindStatusCondition(svc.Status.Conditions, ConditionLoadBalancerReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonReady {
		t.Errorf("condition = %+v, want True/Ready", cond)
	}
	// The API server keeps no generation for Services, so the condition claims
	// no observedGeneration (docs/loadbalancers.md).
	if svc.Generation != 0 {
		t.Errorf("Service generation %d; the docs say Services have none", svc.Generation)
	}
	if cond != nil && cond.ObservedGeneration != 0 {
		t.Errorf("condition's observedGeneration %d; want it unset", cond.ObservedGeneration)
	}

	// Exactly two modifications: finalizer, then status; nothing else changed.
	var mods []*v1.Service
	for len(mods) < 2 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified {
				mods = append(mods, ev.Object.(*v1.Service))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("saw %d modifications, want 2", len(mods))
		}
	}
	if len(mods[0].Status.LoadBalancer.Ingress) != 0 || !slices.Contains(mods[0].Finalizers, Finalizer) {
		t.Errorf("first write: finalizers %v, ingress %v; want the finalizer alone", mods[0].Finalizers, mods[0].Status.LoadBalancer.Ingress)
	}
	for i, m := range mods {
		if diff := cmp.Diff(created.Spec, m.Spec); diff != "" {
			t.Errorf("write %d changed the spec:\n%s", i+1, diff)
		}
		if !cmp.Equal(created.Labels, m.Labels) || !cmp.Equal(created.Annotations, m.Annotations) {
			t.Errorf("write %d changed labels or annotations: %v %v", i+1, m.Labels, m.Annotations)
		}
	}
	h.consistently(2*time.Second, "no further writes", func() bool {
		select {
		case ev := <-w.ResultChan():
			t.Logf("unexpected %s: rv %s", ev.Type, ev.Object.(*v1.Service).ResourceVersion)
			return false
		default:
			return true
		}
	})

	h.eventually(10*time.Second, "events", func() (bool, error) {
		return slices.Equal(h.eventReasons("web"), []string{"EnsuringLoadBalancer", "EnsuredLoadBalancer"}), nil
	})
}

// upstream behaviors B11 and B12: status is written only when the ingress changes;
// type LoadBalancer -> ClusterIP deletes the load balancer, removes the finalizer
// and clears the status; conditions written by others survive.
func TestStatusOnlyOnChangeAndTypeChange(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	h.createService(lbService("web"))
	// Another controller's condition, written while ours are being written.
	for {
		svc := h.getService("web")
		meta.SetStatusCondition(&svc.Status.Conditions, metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Checked", Message: "ok"})
		_, err := h.cs.CoreV1().Services(h.ns).UpdateStatus(h.ctx, svc, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	h.waitIngress("web", 30*time.Second)
	h.waitCondition("web", ReasonReady, 10*time.Second)

	// An annotation change re-ensures. The same ingress is not rewritten; the one
	// status write records the new configuration in the condition.
	ensures := c.count("ensure")
	before := h.getService("web")
	updated := h.updateService("web", func(s *v1.Service) { s.Annotations["note"] = "x" })
	w, err := h.cs.CoreV1().Services(h.ns).Watch(h.ctx, metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: updated.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	h.eventually(10*time.Second, "re-ensure", func() (bool, error) { return c.count("ensure") > ensures, nil })
	writes := 0
	h.consistently(2*time.Second, "one status write, ingress untouched", func() bool {
		select {
		case ev := <-w.ResultChan():
			writes++
			s := ev.Object.(*v1.Service)
			return writes == 1 && cmp.Equal(before.Status.LoadBalancer, s.Status.LoadBalancer)
		default:
			return true
		}
	})
	if cond := meta.FindStatusCondition(h.getService("web").Status.Conditions, ConditionLoadBalancerReady); cond == nil ||
		cond.Message == meta.FindStatusCondition(before.Status.Conditions, ConditionLoadBalancerReady).Message {
		t.Errorf("condition %+v does not record the new configuration", cond)
	}
	if meta.FindStatusCondition(h.getService("web").Status.Conditions, "example.com/Audited") == nil {
		t.Error("another controller's condition was clobbered")
	}

	// A changed IP (ipMode Proxy now) is written.
	c.set(func(c *testCloud) { c.ipMode = ptr.To(v1.LoadBalancerIPModeProxy) })
	h.updateService("web", func(s *v1.Service) { s.Annotations["note"] = "y" })
	h.eventually(10*time.Second, "ipMode Proxy", func() (bool, error) {
		in := h.getService("web").Status.LoadBalancer.Ingress
		return len(in) == 1 && in[0].IPMode != nil && *in[0].IPMode == v1.LoadBalancerIPModeProxy, nil
	})

	// Type change away from LoadBalancer.
	h.updateService("web", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	})
	h.eventually(20*time.Second, "cleanup after type change", func() (bool, error) {
		s := h.getService("web")
		_, exists := c.lb(s)
		// The API server clears the ingress itself on the type change; the
		// controller's status patch (ingress and condition) follows the finalizer's.
		return !exists && !slices.Contains(s.Finalizers, Finalizer) && len(s.Status.LoadBalancer.Ingress) == 0 &&
			meta.FindStatusCondition(s.Status.Conditions, ConditionLoadBalancerReady) == nil, nil
	})
	s := h.getService("web")
	if meta.FindStatusCondition(s.Status.Conditions, "example.com/Audited") == nil {
		t.Error("another controller's condition was clobbered by the cleanup")
	}
	h.waitEvent("web", "DeletingLoadBalancer")
	h.waitEvent("web", "DeletedLoadBalancer")
}

// upstream behavior B11 and the classes difference: a Service whose class no
// provider serves is left completely alone.
func TestUnmappedClassIgnored(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	h.createService(lbService("other", func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }))
	h.createService(lbService("ours"))
	h.waitIngress("ours", 30*time.Second)
	h.consistently(2*time.Second, "class Service untouched", func() bool {
		s := h.getService("other")
		_, exists := c.lb(s)
		return len(s.Finalizers) == 0 && len(s.Status.LoadBalancer.Ingress) == 0 && len(s.Status.Conditions) == 0 && !exists
	})
	if r := h.eventReasons("other"); len(r) != 0 {
		t.Errorf("events on the unmapped-class Service: %v", r)
	}
}

// upstream behavior B13: deletion with the finalizer, deletion without it (from
// the controller's cache), and a recreated Service replacing the old load balancer.
func TestDeletion(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)

	// With finalizer.
	svc := h.waitIngress(h.createService(lbService("a")).Name, 30*time.Second)
	if err := h.cs.CoreV1().Services(h.ns).Delete(h.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "service a gone with its load balancer", func() (bool, error) {
		_, err := h.cs.CoreV1().Services(h.ns).Get(h.ctx, "a", metav1.GetOptions{})
		_, exists := c.lb(svc)
		return apierrors.IsNotFound(err) && !exists, nil
	})

	// Without finalizer (someone removed it): the cache remembers the Service.
	svc = h.waitIngress(h.createService(lbService("b")).Name, 30*time.Second)
	h.updateService("b", func(s *v1.Service) { s.Finalizers = nil })
	if err := h.cs.CoreV1().Services(h.ns).Delete(h.ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "load balancer of b deleted", func() (bool, error) {
		_, exists := c.lb(svc)
		return !exists, nil
	})
	h.waitEvent("b", "DeletedLoadBalancer")

	// Recreated with a new UID: the old load balancer goes, the new one comes.
	old := h.waitIngress(h.createService(lbService("c")).Name, 30*time.Second)
	h.updateService("c", func(s *v1.Service) { s.Finalizers = nil })
	if err := h.cs.CoreV1().Services(h.ns).Delete(h.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := h.createService(lbService("c"))
	if fresh.UID == old.UID {
		t.Fatal("same UID")
	}
	h.waitIngress("c", 30*time.Second)
	h.eventually(20*time.Second, "old incarnation's load balancer deleted", func() (bool, error) {
		_, oldExists := c.lb(old)
		_, newExists := c.lb(fresh)
		return !oldExists && newExists, nil
	})
}

// upstream behavior B14: a RetryError requeues after exactly its delay (never
// sooner), and plain errors back off from the base delay.
func TestRetryErrorAndBackoff(t *testing.T) {
	c := newTestCloud()
	c.provisioning, c.retryAfter = 2500*time.Millisecond, time.Second
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	svc := h.createService(lbService("slow"))
	// A new Service gets no Provisioning condition (its status write comes
	// once provisioning ends). Provisioning is progress: a Normal event,
	// and no Warning.
	if ev := h.waitEvent("slow", EventProvisioning); ev.Type != v1.EventTypeNormal || ev.Message != "Waiting for the cloud: load balancer is provisioning" {
		t.Errorf("%s event: %s %q, want Normal %q", EventProvisioning, ev.Type, ev.Message, "Waiting for the cloud: load balancer is provisioning")
	}
	h.waitIngress("slow", 30*time.Second)
	h.waitCondition("slow", ReasonReady, 10*time.Second)
	if ev, found := h.findEvent("slow", "SyncLoadBalancerFailed"); found {
		t.Errorf("while provisioning: %s SyncLoadBalancerFailed %q, want no such event", ev.Type, ev.Message)
	}
	name := cloudprovider.DefaultLoadBalancerName(svc)
	c.set(func(c *testCloud) {
		times := c.ensureTimes[name]
		if len(times) < 3 {
			t.Errorf("%d Ensure calls, want at least 3 (two while provisioning)", len(times))
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < c.retryAfter-50*time.Millisecond {
				t.Errorf("Ensure %d came %v after the previous one, before the RetryError delay %v", i+1, gap, c.retryAfter)
			}
		}
	})

	// A plain error: condition CloudError, event, next attempt after the base delay.
	c.set(func(c *testCloud) { c.ensureErrs = []error{errors.New("quota exceeded")} })
	h.updateService("slow", func(s *v1.Service) { s.Annotations["retry"] = "1" })
	cond := h.waitCondition("slow", ReasonCloudError, 20*time.Second)
	if want := "quota exceeded"; !strings.Contains(cond.Message, want) {
		t.Errorf("condition message %q does not say %q", cond.Message, want)
	}
	h.waitCondition("slow", ReasonReady, 30*time.Second)
	c.set(func(c *testCloud) {
		times := c.ensureTimes[name]
		n := len(times)
		if gap := times[n-1].Sub(times[n-2]); gap < DefaultRetryBaseDelay-100*time.Millisecond {
			t.Errorf("retry after a plain error came after %v, want at least the %v backoff", gap, DefaultRetryBaseDelay)
		}
	})
	ev := h.waitEvent("slow", "SyncLoadBalancerFailed")
	if ev.Type != v1.EventTypeWarning {
		t.Errorf("SyncLoadBalancerFailed is %s, want Warning", ev.Type)
	}
}

// upstream behavior B15: ImplementedElsewhere on Ensure (finalizer, no status),
// on Update (success, no retry), and on deletion (tolerated).
func TestImplementedElsewhere(t *testing.T) {
	c := newTestCloud()
	c.elsewhere = true
	h := start(t, c, nil, Options{NodeUpdateWindow: 100 * time.Millisecond})
	h.createNodes(0, 1)
	h.createService(lbService("web"))
	h.eventually(20*time.Second, "finalizer", func() (bool, error) {
		return slices.Contains(h.getService("web").Finalizers, Finalizer), nil
	})
	h.eventually(10*time.Second, "ensure called", func() (bool, error) { return c.count("ensure") > 0, nil })
	h.consistently(2*time.Second, "no status written", func() bool {
		s := h.getService("web")
		return len(s.Status.LoadBalancer.Ingress) == 0 && len(s.Status.Conditions) == 0
	})
	ensures := c.count("ensure")
	h.createNodes(1, 2)
	h.consistently(2*time.Second, "no retries or updates", func() bool {
		return c.count("ensure") == ensures && c.count("update") == 0
	})
	if err := h.cs.CoreV1().Services(h.ns).Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "service deleted", func() (bool, error) {
		_, err := h.cs.CoreV1().Services(h.ns).Get(h.ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// upstream behaviors B16 and B17 and the coalescing difference: the backend set
// follows the predicates, changes of the exclusion label, autoscaler taint,
// deletion timestamp and provider ID update it, other node changes cost nothing,
// failed updates escalate to a full ensure, and an update of a missing load
// balancer is a success.
func TestBackendNodes(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{NodeUpdateWindow: 200 * time.Millisecond})
	h.createNodes(0, 2)
	h.createNodes(2, 3, func(n *v1.Node) { n.Spec.ProviderID = "" })
	svc := h.waitIngress(h.createService(lbService("web")).Name, 30*time.Second)
	if diff := cmp.Diff(h.names(0, 1, 2), c.hosts(svc)); diff != "" {
		t.Fatalf("initial hosts (-want +got):\n%s", diff)
	}
	waitHosts := func(what string, want []string) {
		t.Helper()
		h.eventually(10*time.Second, what, func() (bool, error) { return cmp.Equal(want, c.hosts(svc)), nil })
	}
	noUpdates := func(what string) {
		t.Helper()
		n := c.count("update")
		h.consistently(1500*time.Millisecond, what, func() bool { return c.count("update") == n })
	}

	steps := []struct {
		desc string
		node int
		fn   func(*v1.Node)
		want []int // nil: no update expected
	}{
		{"exclusion label true", 0, func(n *v1.Node) { setLabel(n, LabelExcludeFromLB, "true") }, []int{1, 2}},
		{"exclusion label false", 0, func(n *v1.Node) { setLabel(n, LabelExcludeFromLB, "false") }, []int{0, 1, 2}},
		{"exclusion label empty", 0, func(n *v1.Node) { setLabel(n, LabelExcludeFromLB, "") }, []int{1, 2}},
		{"exclusion label removed", 0, func(n *v1.Node) { delete(n.Labels, LabelExcludeFromLB) }, []int{0, 1, 2}},
		{"autoscaler taint", 1, func(n *v1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: TaintToBeDeleted, Effect: v1.TaintEffectNoSchedule})
		}, []int{0, 2}},
		{"autoscaler taint removed", 1, func(n *v1.Node) { n.Spec.Taints = nil }, []int{0, 1, 2}},
		{"not ready", 2, func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		}, nil},
		{"other taint", 2, func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "example.com/spurious", Effect: v1.TaintEffectNoSchedule}}
		}, nil},
		{"cordoned", 2, func(n *v1.Node) { n.Spec.Unschedulable = true }, nil},
		{"other label", 2, func(n *v1.Node) { setLabel(n, "example.com/x", "1") }, nil},
	}
	for _, s := range steps {
		if s.node == 2 && s.desc == "not ready" {
			// Status is a subresource; Update ignores it, UpdateStatus sets it.
			n, err := h.cs.CoreV1().Nodes().Get(h.ctx, h.nodeName(2), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.fn(n)
			if _, err := h.cs.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		} else {
			h.updateNode(s.node, s.fn)
		}
		if s.want == nil {
			noUpdates(s.desc + ": no UpdateLoadBalancer")
			continue
		}
		waitHosts(s.desc, h.names(s.want...))
	}

	// Provider ID set (kubelet registers without, the node controller sets it):
	// same names, still one update.
	updates := c.count("update")
	h.updateNode(2, func(n *v1.Node) { n.Spec.ProviderID = "fake://" + n.Name })
	h.eventually(10*time.Second, "update after providerID change", func() (bool, error) { return c.count("update") == updates+1, nil })

	// Deletion timestamp (a finalizer keeps the node) and then deletion.
	h.updateNode(2, func(n *v1.Node) { n.Finalizers = []string{"example.com/keep"} })
	if err := h.cs.CoreV1().Nodes().Delete(h.ctx, h.nodeName(2), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHosts("deletion timestamp", h.names(0, 1))
	h.updateNode(2, func(n *v1.Node) { n.Finalizers = nil })
	noUpdates("node finally deleted: set unchanged")

	// A failed update escalates to a full ensure with the current nodes.
	ensures := c.count("ensure")
	c.set(func(c *testCloud) { c.updateErrs = []error{errors.New("backend API down")} })
	h.createNodes(3, 4)
	h.eventually(20*time.Second, "full ensure after a failed update", func() (bool, error) {
		return c.count("ensure") > ensures && cmp.Equal(h.names(0, 1, 3), c.hosts(svc)), nil
	})
	ev := h.waitEvent("web", "UpdateLoadBalancerFailed")
	if !strings.Contains(ev.Message, h.nodeName(3)) {
		t.Errorf("UpdateLoadBalancerFailed message %q does not list the hosts", ev.Message)
	}
	if strings.Contains(ev.Message, "limited") {
		t.Errorf("UpdateLoadBalancerFailed message %q says the names are limited, but all are shown", ev.Message)
	}

	// An update the cloud answers with a RetryError (Octavia's 409 while the
	// load balancer is PENDING_UPDATE) is progress, not a failure: a full
	// ensure finishes it with the current nodes and no Warning is recorded.
	warnings := func() int32 {
		evs, err := h.cs.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,type=Warning"})
		if err != nil {
			t.Fatalf("list events: %v", err)
		}
		var n int32
		for _, e := range evs.Items {
			n += max(1, e.Count)
		}
		return n
	}
	before := warnings()
	ensures = c.count("ensure")
	c.set(func(c *testCloud) {
		c.updateErrs = []error{cloudproviderapi.NewRetryError("load balancer web is busy (409)", 100*time.Millisecond)}
	})
	h.createNodes(5, 6)
	h.eventually(20*time.Second, "full ensure after a busy update", func() (bool, error) {
		return c.count("ensure") > ensures && cmp.Equal(h.names(0, 1, 3, 5), c.hosts(svc)), nil
	})
	if got := warnings(); got != before {
		evs, _ := h.cs.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,type=Warning"})
		t.Errorf("a busy load balancer (RetryError) raised Warning events: %d before, %d after: %+v", before, got, evs.Items)
	}

	// A failed update of a load balancer that no longer exists is a success.
	c.set(func(c *testCloud) {
		delete(c.lbs, cloudprovider.DefaultLoadBalancerName(svc))
		c.updateErrs = []error{errors.New("not found")}
	})
	ensures = c.count("ensure")
	updates = c.count("update")
	h.createNodes(4, 5)
	h.eventually(10*time.Second, "update attempted", func() (bool, error) { return c.count("update") > updates, nil })
	h.consistently(2*time.Second, "no escalation for a missing load balancer", func() bool { return c.count("ensure") == ensures })
}

// joiningNode makes a node as the kubelet registers it under an external
// cloud provider: the uninitialized taint, no provider ID.
func joiningNode(n *v1.Node) {
	n.Spec.ProviderID = ""
	n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
}

func initializeNode(n *v1.Node) { n.Spec.ProviderID, n.Spec.Taints = "fake://"+n.Name, nil }

// waitPass waits until a backend pass has run (gone past its node-change
// window) after passes had run: the changes made before are its own or an
// earlier pass's. The timing of the passes themselves is TestBackendPassTiming's.
func (h *harness) waitPass(passes uint64) {
	h.t.Helper()
	h.eventually(20*time.Second, "a backend pass", func() (bool, error) { return histogramCount(h.t, nodeSyncLatency) > passes, nil })
}

// A joining node (uninitialized taint, no provider ID yet) becomes a backend
// when the node controller initializes it, in one update that names it by
// provider ID; a burst of joining nodes reaches the load balancer in one
// update; a removal does not wait for joining nodes; and a Service whose only
// nodes are joining gets them at once. NodeInitWait is far longer than the
// test, so that no node's wait ends during it: what is held back stays held
// until the node is initialized. When each decision is taken is
// TestBackendPassTiming's.
func TestJoiningNodesWaitForInitialization(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{NodeUpdateWindow: 200 * time.Millisecond, NodeInitWait: time.Hour})
	// Each step waits for the pass of its node changes to end (the metric
	// is observed after the updates are sent), so that the next step's
	// changes come to a pass of their own.
	passes := histogramCount(t, nodeSyncLatency)
	h.createNodes(0, 1, joiningNode)
	h.waitPass(passes)
	svc := h.waitIngress(h.createService(lbService("web")).Name, 30*time.Second)
	if diff := cmp.Diff(h.names(0), c.hosts(svc)); diff != "" {
		t.Fatalf("only joining nodes: hosts (-want +got):\n%s", diff)
	}
	passes = histogramCount(t, nodeSyncLatency)
	h.updateNode(0, initializeNode)
	h.waitPass(passes)
	if n := c.count("update"); n != 1 {
		t.Fatalf("%d updates after node 0 was initialized, want 1 (naming it by provider ID)", n)
	}

	// A pass runs while node 1 joins; had it added the node, its
	// initialization would cost a second update.
	updates := c.count("update")
	passes = histogramCount(t, nodeSyncLatency)
	h.createNodes(1, 2, joiningNode)
	h.waitPass(passes)
	passes = histogramCount(t, nodeSyncLatency)
	h.updateNode(1, initializeNode)
	h.waitPass(passes)
	if diff := cmp.Diff(h.names(0, 1), c.hosts(svc)); diff != "" {
		t.Errorf("initialized node: hosts (-want +got):\n%s", diff)
	}
	if n := c.count("update"); n != updates+1 {
		t.Errorf("%d updates for one joining node, want 1", n-updates)
	}

	// A burst initialized one by one, each in a pass of its own: one
	// update, once the last is initialized.
	updates = c.count("update")
	passes = histogramCount(t, nodeSyncLatency)
	h.createNodes(2, 5, joiningNode)
	for i := 2; i < 5; i++ {
		h.waitPass(passes)
		passes = histogramCount(t, nodeSyncLatency)
		h.updateNode(i, initializeNode)
	}
	h.waitPass(passes)
	if diff := cmp.Diff(h.names(0, 1, 2, 3, 4), c.hosts(svc)); diff != "" {
		t.Errorf("burst: hosts (-want +got):\n%s", diff)
	}
	if n := c.count("update"); n != updates+1 {
		t.Errorf("%d updates for a burst of three joining nodes, want 1", n-updates)
	}

	// A removal does not wait for a joining node (which waits for an hour).
	h.createNodes(5, 6, joiningNode)
	h.updateNode(0, func(n *v1.Node) { setLabel(n, LabelExcludeFromLB, "true") })
	h.eventually(20*time.Second, "excluded node removed while another joins", func() (bool, error) {
		return cmp.Equal(h.names(1, 2, 3, 4), c.hosts(svc)), nil
	})
}

// A joining node that stays uninitialized becomes a backend once NodeInitWait
// has passed (TestBackendPassTiming: not before).
func TestUninitializedNodeAddedAfterWait(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{NodeUpdateWindow: 200 * time.Millisecond, NodeInitWait: time.Second})
	h.createNodes(0, 1)
	svc := h.waitIngress(h.createService(lbService("web")).Name, 30*time.Second)
	h.createNodes(1, 2, joiningNode)
	h.eventually(30*time.Second, "node that stays uninitialized added after the wait", func() (bool, error) {
		return cmp.Equal(h.names(0, 1), c.hosts(svc)), nil
	})
}

func setLabel(n *v1.Node, k, v string) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
}

// The coalescing difference: 20 nodes joining at once produce at most a couple of
// updates per load balancer.
func TestNodeBurstCoalesced(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	var svcs []*v1.Service
	for i := range 5 {
		svcs = append(svcs, h.createService(lbService(fmt.Sprintf("web-%d", i))))
	}
	for _, s := range svcs {
		h.waitIngress(s.Name, 30*time.Second)
	}
	h.createNodes(1, 21)
	all := make([]int, 21)
	for i := range all {
		all[i] = i
	}
	for _, s := range svcs {
		h.eventually(20*time.Second, "all 21 hosts on "+s.Name, func() (bool, error) { return cmp.Equal(h.names(all...), c.hosts(s)), nil })
	}
	if n, max := c.count("update"), 2*len(svcs); n > max {
		t.Errorf("%d UpdateLoadBalancer calls for %d load balancers, want at most %d", n, len(svcs), max)
	}
	if ensures := c.count("ensure"); ensures != len(svcs) {
		t.Errorf("%d Ensure calls, want %d (node changes must not re-ensure)", ensures, len(svcs))
	}
}

// Non-blocking provisioning: 200 Services created at once against a cloud that
// takes seconds to provision each load balancer all get their ingress, and the
// cloud had far more load balancers provisioning at once than there are workers
// (a blocked worker would hold one load balancer each).
func TestManyServicesSlowProvisioning(t *testing.T) {
	const n = 200
	c := newTestCloud()
	c.provisioning, c.retryAfter = 3*time.Second, time.Second
	opts := Options{Workers: 10}
	latency := provisioningLatency.WithLabelValues("fake").(prometheus.Histogram)
	before := histogramCount(t, latency)
	h := start(t, c, nil, opts)
	h.createNodes(0, 3)
	for i := range n {
		h.createService(lbService(fmt.Sprintf("svc-%03d", i)))
	}
	h.eventually(150*time.Second, "ingress on all Services", func() (bool, error) {
		list, err := h.cs.CoreV1().Services(h.ns).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				done++
			}
		}
		return done == n, nil
	})
	c.set(func(c *testCloud) {
		if c.maxProvisioning <= 2*opts.Workers {
			t.Errorf("at most %d load balancers provisioned at once with %d workers: workers wait for the cloud", c.maxProvisioning, opts.Workers)
		}
		if len(c.lbs) != n {
			t.Errorf("%d load balancers in the cloud, want %d (no duplicates, no leaks)", len(c.lbs), n)
		}
	})
	if got := histogramCount(t, latency) - before; got != n {
		t.Errorf("provisioning latency observed %d times, want %d", got, n)
	}
}

// Conditions and clear errors: an invalid stratus annotation is a Warning event
// and an InvalidConfiguration condition naming it, the cloud is not called, the
// Service is not retried in a loop, and fixing the annotation provisions it.
func TestInvalidAnnotation(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second})
	h.createNodes(0, 1)
	name := annotations.LBHealthCheckInterval.Name
	h.createService(lbService("web", func(s *v1.Service) { s.Annotations[name] = "often" }))
	cond := h.waitCondition("web", ReasonInvalidConfiguration, 20*time.Second)
	if !strings.Contains(cond.Message, name) {
		t.Errorf("condition message %q does not name %s", cond.Message, name)
	}
	ev := h.waitEvent("web", "SyncLoadBalancerFailed")
	if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, name) {
		t.Errorf("event %s %q; want a Warning naming %s", ev.Type, ev.Message, name)
	}
	h.consistently(2*time.Second, "no cloud call, no retry loop", func() bool {
		e, _ := h.findEvent("web", "SyncLoadBalancerFailed")
		return c.count("ensure") == 0 && e.Count <= 1
	})
	h.updateService("web", func(s *v1.Service) { s.Annotations[name] = "15s" })
	h.waitIngress("web", 30*time.Second)
	h.waitCondition("web", ReasonReady, 10*time.Second)
}

// Annotation values of any size: the InvalidConfiguration condition and the
// SyncLoadBalancerFailed event repeat each value shortened (with its length),
// and the whole message is capped too, with the length of what it replaces.
func TestInvalidAnnotationLongValues(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second})
	h.createNodes(0, 1)
	// Twelve unknown annotations of 20 kB: within the API server's 256 kB for
	// all annotations, and far more than a message may repeat.
	const n, size = 12, 20000
	h.createService(lbService("web", func(s *v1.Service) {
		for i := range n {
			s.Annotations[fmt.Sprintf("%sunknown-%02d", annotations.Prefix, i)] = strings.Repeat("v", size)
		}
	}))
	first := fmt.Sprintf(`invalid annotation %sunknown-00="%s"...[%d bytes]: unknown stratus annotation`, annotations.Prefix, strings.Repeat("v", echo.MaxValue), size)
	check := func(what, msg string) {
		t.Helper()
		if !strings.Contains(msg, first) {
			t.Errorf("%s message does not start with the shortened first annotation %q: %.300q", what, first, msg)
		}
		// The full message would be about 1.9 kB: it is cut to echo.MaxMessage
		// bytes plus a marker giving its length.
		marker := regexp.MustCompile(`\.\.\.\[(\d+) bytes\]$`).FindStringSubmatch(msg)
		if marker == nil || len(msg) != echo.MaxMessage+len(marker[0]) {
			t.Errorf("%s message of %d bytes does not end with a length marker after %d bytes: ...%q", what, len(msg), echo.MaxMessage, msg[max(0, len(msg)-60):])
		}
	}
	cond := h.waitCondition("web", ReasonInvalidConfiguration, 20*time.Second)
	check("condition", cond.Message)
	ev := h.waitEvent("web", "SyncLoadBalancerFailed")
	check("event", ev.Message)
	if c.count("ensure") != 0 {
		t.Errorf("cloud called %d times for an invalid Service", c.count("ensure"))
	}
}

// A Service with no backend nodes still gets its load balancer, with an
// UnAvailableLoadBalancer event and the NoBackends condition; the first node makes
// it Ready.
func TestNoBackends(t *testing.T) {
	c := newTestCloud()
	h := start(t, c, nil, Options{NodeUpdateWindow: 100 * time.Millisecond})
	h.createNodes(0, 1, func(n *v1.Node) { setLabel(n, LabelExcludeFromLB, "true") })
	h.createService(lbService("web"))
	h.waitIngress("web", 30*time.Second)
	h.waitCondition("web", ReasonNoBackends, 10*time.Second)
	h.waitEvent("web", "UnAvailableLoadBalancer")
	h.createNodes(1, 2)
	h.waitCondition("web", ReasonReady, 10*time.Second)
	h.waitEvent("web", "UpdatedLoadBalancer")
}

// Drift repair: a load balancer deleted behind our back is recreated, and one
// whose address changed gets its Service status corrected — asked one by one
// (GetLoadBalancer) or, when the provider can list, with one listing per period.
func TestDriftRepair(t *testing.T) {
	for _, listing := range []bool{false, true} {
		t.Run(fmt.Sprintf("listing=%v", listing), func(t *testing.T) {
			c := newTestCloud()
			var clouds *cloud.Set
			if listing {
				clouds = cloud.Single(cloud.NewProvider("fake", listingCloud{c}))
			}
			h := start(t, c, clouds, Options{ResyncPeriod: 500 * time.Millisecond})
			h.createNodes(0, 1)
			svc := h.waitIngress(h.createService(lbService("web")).Name, 30*time.Second)
			name := cloudprovider.DefaultLoadBalancerName(svc)

			// A healthy load balancer is only looked at: GetLoadBalancer (or the
			// listing) reports less than EnsureLoadBalancer returned (no ports), and
			// that is not drift.
			check := "get"
			if listing {
				check = "list"
			}
			h.eventually(10*time.Second, "drift checks running", func() (bool, error) { return c.count(check) >= 2, nil })
			if n := c.count("ensure"); n != 1 {
				t.Errorf("%d Ensure calls for a load balancer without drift, want 1", n)
			}
			if listing && c.count("get") != 0 {
				t.Errorf("%d GetLoadBalancer calls although the provider lists its load balancers", c.count("get"))
			}

			c.set(func(c *testCloud) { delete(c.lbs, name) })
			h.eventually(20*time.Second, "load balancer recreated", func() (bool, error) { return c.exists(name), nil })

			c.set(func(c *testCloud) { c.lbs[name].ip = "198.51.100.7" })
			h.eventually(20*time.Second, "status follows the cloud", func() (bool, error) {
				in := h.getService("web").Status.LoadBalancer.Ingress
				return len(in) == 1 && in[0].IP == "198.51.100.7", nil
			})
		})
	}
}

// Orphans: a load balancer listed as this cluster's whose Service is gone is
// deleted after the grace period; a foreign one (not listed) and live ones stay.
func TestOrphanRemoval(t *testing.T) {
	c := newTestCloud()
	clouds := cloud.Single(cloud.NewProvider("fake", listingCloud{c}))
	before := counterValue(t, orphansDeleted.WithLabelValues("fake"))
	h := start(t, c, clouds, Options{ResyncPeriod: 300 * time.Millisecond, OrphanGracePeriod: time.Second})
	h.createNodes(0, 1)
	live := h.waitIngress(h.createService(lbService("live")).Name, 30*time.Second)

	// Load balancers are named after the Service UID (upstream's default name).
	name := func(uid types.UID) string {
		return cloudprovider.DefaultLoadBalancerName(&v1.Service{ObjectMeta: metav1.ObjectMeta{UID: uid}})
	}
	orphan, stale, foreign := name("uid-gone"), name("uid-old"), name("uid-foreign")
	c.put(orphan, testLB{svc: types.NamespacedName{Namespace: h.ns, Name: "gone"}, uid: "uid-gone", cluster: cloud.DefaultClusterName, ip: "203.0.113.200"})
	// Same name as a live Service but another UID: an old incarnation's leftover.
	c.put(stale, testLB{svc: types.NamespacedName{Namespace: h.ns, Name: "live"}, uid: "uid-old", cluster: cloud.DefaultClusterName, ip: "203.0.113.201"})
	// Another cluster's: the lister does not return it.
	c.put(foreign, testLB{svc: types.NamespacedName{Namespace: h.ns, Name: "gone"}, uid: "uid-foreign", cluster: "another-cluster", ip: "203.0.113.202"})

	// When they are deleted (after the grace period) is TestOrphanTiming's.
	h.eventually(30*time.Second, "orphans deleted", func() (bool, error) {
		return !c.exists(orphan) && !c.exists(stale), nil
	})
	if !c.exists(foreign) {
		t.Error("a load balancer of another cluster was deleted")
	}
	if _, ok := c.lb(live); !ok {
		t.Error("the live Service's load balancer was deleted")
	}
	if got := counterValue(t, orphansDeleted.WithLabelValues("fake")) - before; got != 2 {
		t.Errorf("orphan metric grew by %v, want 2", got)
	}
}

// Upstream feature semantics (§2.3.7): the Service reaches the provider as it is
// (ETP Local with its health-check node port, no node ports, mixed protocols),
// and multiple ingress entries and ipMode are published as returned.
func TestServicePassedThrough(t *testing.T) {
	c := newTestCloud()
	c.extraIngress, c.ipMode = "2001:db8::10", ptr.To(v1.LoadBalancerIPModeProxy)
	h := start(t, c, nil, Options{})
	h.createNodes(0, 1)
	h.createService(lbService("web", func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})
	}))
	svc := h.waitIngress("web", 30*time.Second)
	lb, _ := c.lb(svc)
	got := lb.lastSvc
	if got.Spec.HealthCheckNodePort == 0 || got.Spec.HealthCheckNodePort != svc.Spec.HealthCheckNodePort {
		t.Errorf("provider saw healthCheckNodePort %d, Service has %d", got.Spec.HealthCheckNodePort, svc.Spec.HealthCheckNodePort)
	}
	for _, p := range got.Spec.Ports {
		if p.NodePort != 0 {
			t.Errorf("port %s has node port %d with allocateLoadBalancerNodePorts=false", p.Name, p.NodePort)
		}
	}
	if len(got.Spec.Ports) != 2 || got.Spec.Ports[1].Protocol != v1.ProtocolUDP {
		t.Errorf("provider saw ports %v, want TCP and UDP", got.Spec.Ports)
	}
	in := svc.Status.LoadBalancer.Ingress
	if len(in) != 2 || in[1].IP != "2001:db8::10" || in[0].IPMode == nil || *in[0].IPMode != v1.LoadBalancerIPModeProxy {
		t.Errorf("ingress %+v, want both families with ipMode Proxy", in)
	}
}

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// testProviders are handed out by the "service-test" provider factory, keyed by the
// provider's inline cloud-config, so that tests can build sets through the real
// configuration path (cloud.Build).
var testProviders sync.Map // string -> cloudprovider.Interface

func init() {
	cloudprovider.RegisterCloudProvider("service-test", func(config io.Reader) (cloudprovider.Interface, error) {
		key, err := io.ReadAll(config)
		if err != nil {
			return nil, err
		}
		p, ok := testProviders.Load(string(key))
		if !ok {
			return nil, fmt.Errorf("no test provider %q", key)
		}
		return p.(cloudprovider.Interface), nil
	})
}

func buildSet(t *testing.T, cfg cloud.Config, providers map[string]cloudprovider.Interface) *cloud.Set {
	t.Helper()
	for i, pc := range cfg.Providers {
		key := t.Name() + "/" + pc.Name
		testProviders.Store(key, providers[pc.Name])
		t.Cleanup(func() { testProviders.Delete(key) })
		cfg.Providers[i].Type, cfg.Providers[i].CloudConfig = "service-test", key
	}
	set, err := cloud.Build(cfg)
	if err != nil {
		t.Fatalf("build cloud set: %v", err)
	}
	return set
}

// The classes difference: class-less Services go to the default load balancer
// provider, a mapped class to its provider, and an unmapped class is left alone.
// Backends are the cluster's nodes whoever owns them (hybrid clusters). (A class
// mapped to a provider without load balancers is rejected by cloud.Build.)
func TestClasses(t *testing.T) {
	def, classy := newTestCloud(), newTestCloud()
	classy.Provider = "classy"
	set := buildSet(t, cloud.Config{
		Providers: []cloud.ProviderConfig{
			{Name: "default"},
			{Name: "classy", LoadBalancerClasses: []string{"example.com/classy"}},
			{Name: "nolb"},
		},
		DefaultNodeProvider:         "default",
		DefaultLoadBalancerProvider: "default",
	}, map[string]cloudprovider.Interface{
		"default": def,
		"classy":  classy,
		"nolb":    &fake.Cloud{Provider: "nolb", DisableLoadBalancers: true},
	})
	h := start(t, def, set, Options{})
	h.createNodes(0, 1)
	h.createNodes(1, 2, func(n *v1.Node) { n.Spec.ProviderID = "classy://" + n.Name })
	h.createNodes(2, 3, func(n *v1.Node) { n.Spec.ProviderID = "unknown://" + n.Name })

	plain := h.waitIngress(h.createService(lbService("plain")).Name, 30*time.Second)
	withClass := h.waitIngress(h.createService(lbService("classy", func(s *v1.Service) {
		s.Spec.LoadBalancerClass = ptr.To("example.com/classy")
	})).Name, 30*time.Second)
	h.createService(lbService("unmapped", func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/unmapped") }))

	if _, ok := def.lb(plain); !ok {
		t.Error("class-less Service not served by the default provider")
	}
	if _, ok := classy.lb(plain); ok {
		t.Error("class-less Service served by the class provider")
	}
	if _, ok := classy.lb(withClass); !ok {
		t.Error("Service of a mapped class not served by its provider")
	}
	if _, ok := def.lb(withClass); ok {
		t.Error("Service of a mapped class served by the default provider")
	}
	if diff := cmp.Diff(h.names(0, 1, 2), classy.hosts(withClass)); diff != "" {
		t.Errorf("backends of the class load balancer (-want +got):\n%s", diff)
	}
	h.consistently(2*time.Second, "Services of unserved classes untouched", func() bool {
		for _, name := range []string{"unmapped"} {
			s := h.getService(name)
			if len(s.Finalizers)+len(s.Status.LoadBalancer.Ingress)+len(s.Status.Conditions) > 0 {
				return false
			}
		}
		return def.count("ensure") == 1 && classy.count("ensure") == 1
	})
	for _, name := range []string{"unmapped"} {
		if r := h.eventReasons(name); len(r) != 0 {
			t.Errorf("events on %s: %v", name, r)
		}
	}
}

// Add: not started without any load-balancer provider; invalid options name the
// option.
func TestAdd(t *testing.T) {
	env := testenv.Get(t)
	newMgr := func() manager.Manager {
		mgr, err := manager.New(env.Config, manager.Options{
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return mgr
	}
	nolb := cloud.Single(cloud.NewProvider("nolb", &fake.Cloud{DisableLoadBalancers: true}))
	if started, err := Add(newMgr(), nolb, Options{}); started || err != nil {
		t.Errorf("Add without load balancer support = %v, %v; want false, nil", started, err)
	}
	withLB := cloud.Single(cloud.NewProvider("fake", newTestCloud()))
	if started, err := Add(newMgr(), withLB, Options{Workers: -1}); started || err == nil || !strings.Contains(err.Error(), "--concurrent-service-syncs") {
		t.Errorf("Add with Workers -1 = %v, %v; want an error naming --concurrent-service-syncs", started, err)
	}
}

// A Service deleted without the finalizer while the manager was down leaves a load
// balancer nobody remembers: after the restart, the orphan scan removes it, and the
// surviving Service's load balancer is re-ensured, not duplicated.
func TestRestartOrphan(t *testing.T) {
	c := newTestCloud()
	clouds := cloud.Single(cloud.NewProvider("fake", listingCloud{c}))
	opts := Options{ResyncPeriod: 300 * time.Millisecond, OrphanGracePeriod: 500 * time.Millisecond}
	ns := testenv.Get(t).Namespace(t)
	h, stop := startIn(t, ns, c, clouds, opts)
	h.createNodes(0, 1)
	gone := h.waitIngress(h.createService(lbService("gone")).Name, 30*time.Second)
	kept := h.waitIngress(h.createService(lbService("kept")).Name, 30*time.Second)
	stop()

	h.updateService("gone", func(s *v1.Service) { s.Finalizers = nil })
	if err := h.cs.CoreV1().Services(ns).Delete(h.ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h, _ = startIn(t, ns, c, clouds, opts)
	h.eventually(30*time.Second, "orphan of the deleted Service removed", func() (bool, error) {
		_, exists := c.lb(gone)
		return !exists, nil
	})
	lb, ok := c.lb(kept)
	if !ok {
		t.Fatal("load balancer of the surviving Service deleted")
	}
	if in := h.getService("kept").Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != lb.ip {
		t.Errorf("surviving Service ingress %v, load balancer IP %s", in, lb.ip)
	}
	c.set(func(c *testCloud) {
		if len(c.lbs) != 1 {
			t.Errorf("%d load balancers in the cloud, want 1", len(c.lbs))
		}
	})
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// After a restart (or a leader change) a load balancer whose Ready condition
// records exactly the current configuration is adopted without EnsureLoadBalancer;
// a Service changed while the manager was down is re-ensured, and a load balancer
// deleted meanwhile is caught by the first drift check.
func TestRestartAdoption(t *testing.T) {
	c := newTestCloud()
	opts := Options{ResyncPeriod: time.Second, NodeUpdateWindow: 200 * time.Millisecond}
	ns := testenv.Get(t).Namespace(t)
	h, stop := startIn(t, ns, c, nil, opts)
	h.createNodes(0, 2)
	svcs := map[string]*v1.Service{}
	for _, name := range []string{"same", "changed", "deleted"} {
		h.createService(lbService(name))
		h.waitCondition(name, ReasonReady, 30*time.Second)
		svcs[name] = h.getService(name)
	}
	stop()

	h.updateService("changed", func(s *v1.Service) { s.Annotations["note"] = "changed while down" })
	c.set(func(c *testCloud) { delete(c.lbs, cloudprovider.DefaultLoadBalancerName(svcs["deleted"])) })
	ensures := func(name string) int {
		var n int
		c.set(func(c *testCloud) { n = len(c.ensureTimes[cloudprovider.DefaultLoadBalancerName(svcs[name])]) })
		return n
	}

	h, _ = startIn(t, ns, c, nil, opts)
	h.eventually(20*time.Second, "changed Service re-ensured", func() (bool, error) { return ensures("changed") == 2, nil })
	h.eventually(20*time.Second, "deleted load balancer recreated", func() (bool, error) {
		_, ok := c.lb(svcs["deleted"])
		return ok, nil
	})
	if n := ensures("same"); n != 1 {
		t.Errorf("unchanged Service ensured %d times, want 1 (adopted after the restart)", n)
	}
	// The adopted load balancer takes part in backend updates.
	h.createNodes(2, 3)
	h.eventually(20*time.Second, "adopted load balancer updated", func() (bool, error) {
		return cmp.Equal(h.names(0, 1, 2), c.hosts(svcs["same"])), nil
	})
	if n := ensures("same"); n != 1 {
		t.Errorf("unchanged Service ensured %d times after a node joined, want 1", n)
	}
}

package service

import (
	"os"

	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
)

func TestMain(m *testing.M) {
	// STRATUS_TEST_LOG=1 shows the controller's logs.
	ctrllog.SetLogger(funcr.New(func(prefix, args string) {
		if os.Getenv("STRATUS_TEST_LOG") != "" {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{Verbosity: 1}))
	// The package's tests create several hundred Services on one control
	// plane, more than the default /24 of Service IPs holds.
	testenv.MainWith(m, map[string]string{"service-cluster-ip-range": "10.96.0.0/16"})
}

// harness is one running service controller against the test API server, scoped
// to a fresh namespace (Nodes are cluster-wide; tests create their own and delete
// them).
type harness struct {
	t     *testing.T
	ctx   context.Context
	cs    kubernetes.Interface
	ns    string
	cloud *testCloud
}

// start runs a manager with the service controller for clouds (default: a Single
// set of c) in a fresh namespace until the test ends.
func start(t *testing.T, c *testCloud, clouds *cloud.Set, opts Options) *harness {
	t.Helper()
	h, _ := startIn(t, testenv.Get(t).Namespace(t), c, clouds, opts)
	return h
}

// startIn runs a manager scoped to namespace ns; stop ends it (and waits), as the
// end of the test does.
func startIn(t *testing.T, ns string, c *testCloud, clouds *cloud.Set, opts Options) (h *harness, stop func()) {
	t.Helper()
	env := testenv.Get(t)
	if clouds == nil {
		clouds = cloud.Single(cloud.NewProvider("fake", c))
	}
	mgr, err := manager.New(env.Config, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	started, err := Add(mgr, clouds, opts)
	if err != nil || !started {
		t.Fatalf("Add = %v, %v; want started", started, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	// The harness's own calls outlive a stopped manager.
	hctx, hcancel := context.WithCancel(context.Background())
	t.Cleanup(hcancel)
	return &harness{t: t, ctx: hctx, cs: env.Clientset(t), ns: ns, cloud: c}, stop
}

// eventually polls cond until it holds or the timeout passes.
func (h *harness) eventually(timeout time.Duration, what string, cond func() (bool, error)) {
	h.t.Helper()
	testsupport.Eventually(h.t, timeout, what, func(context.Context) (bool, error) { return cond() })
}

// consistently checks cond for the whole duration (absence of an effect).
func (h *harness) consistently(d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	testsupport.Consistently(h.t, d, what, func(context.Context) (bool, string) { return cond(), "" })
}

func lbService(name string, mutate ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}, Annotations: map[string]string{"owner": "test"}},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func (h *harness) createService(svc *v1.Service) *v1.Service {
	h.t.Helper()
	out, err := h.cs.CoreV1().Services(h.ns).Create(h.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return out
}

func (h *harness) getService(name string) *v1.Service {
	h.t.Helper()
	svc, err := h.cs.CoreV1().Services(h.ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("get service %s: %v", name, err)
	}
	return svc
}

// updateService applies fn to the current Service, retrying on conflicts.
func (h *harness) updateService(name string, fn func(*v1.Service)) *v1.Service {
	h.t.Helper()
	for {
		svc := h.getService(name)
		fn(svc)
		out, err := h.cs.CoreV1().Services(h.ns).Update(h.ctx, svc, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			h.t.Fatalf("update service %s: %v", name, err)
		}
		return out
	}
}

// waitIngress waits until the Service has ingress and returns it.
func (h *harness) waitIngress(name string, timeout time.Duration) *v1.Service {
	h.t.Helper()
	var svc *v1.Service
	h.eventually(timeout, "ingress of "+name, func() (bool, error) {
		svc = h.getService(name)
		return len(svc.Status.LoadBalancer.Ingress) > 0, nil
	})
	return svc
}

func (h *harness) waitCondition(name, reason string, timeout time.Duration) metav1.Condition {
	h.t.Helper()
	var cond metav1.Condition
	h.eventually(timeout, fmt.Sprintf("condition %s=%s on %s", ConditionLoadBalancerReady, reason, name), func() (bool, error) {
		c := meta.FindStatusCondition(h.getService(name).Status.Conditions, ConditionLoadBalancerReady)
		if c != nil {
			cond = *c
		}
		return c != nil && c.Reason == reason, nil
	})
	return cond
}

// eventReasons returns the reasons of the events about the Service, oldest first.
func (h *harness) eventReasons(name string) []string {
	h.t.Helper()
	evs, err := h.cs.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		h.t.Fatalf("list events: %v", err)
	}
	slices.SortStableFunc(evs.Items, func(a, b v1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
	var out []string
	for _, e := range evs.Items {
		if e.Reason == "ClusterIPNotAllocated" {
			// The API server's ClusterIP repair loop, when it runs
			// between a Service's creation and its IP's allocation
			// record (seen on a loaded machine): not ours.
			continue
		}
		if e.Source.Component != Component {
			h.t.Errorf("event %s from component %q, want %q", e.Reason, e.Source.Component, Component)
		}
		out = append(out, e.Reason)
	}
	return out
}

// findEvent returns the first event of the Service with reason.
func (h *harness) findEvent(name, reason string) (v1.Event, bool) {
	h.t.Helper()
	evs, err := h.cs.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		h.t.Fatalf("list events: %v", err)
	}
	if len(evs.Items) == 0 {
		return v1.Event{}, false
	}
	return evs.Items[0], true
}

func (h *harness) waitEvent(name, reason string) v1.Event {
	h.t.Helper()
	var ev v1.Event
	h.eventually(20*time.Second, "event "+reason+" on "+name, func() (bool, error) {
		var ok bool
		ev, ok = h.findEvent(name, reason)
		return ok, nil
	})
	return ev
}

// nodeName is unique per test, so that leftovers of another test never matter.
func (h *harness) nodeName(i int) string { return fmt.Sprintf("%s-n%d", h.ns, i) }

// createNodes creates nodes i in [from, to) and deletes them when the test ends.
func (h *harness) createNodes(from, to int, mutate ...func(*v1.Node)) {
	h.t.Helper()
	for i := from; i < to; i++ {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.nodeName(i)}, Spec: v1.NodeSpec{ProviderID: "fake://" + h.nodeName(i)}}
		for _, m := range mutate {
			m(n)
		}
		if _, err := h.cs.CoreV1().Nodes().Create(h.ctx, n, metav1.CreateOptions{}); err != nil {
			h.t.Fatalf("create node: %v", err)
		}
		name := n.Name
		h.t.Cleanup(func() {
			ctx := context.Background()
			if n, err := h.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil && len(n.Finalizers) > 0 {
				n.Finalizers = nil
				_, _ = h.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			}
			_ = h.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
}

func (h *harness) updateNode(i int, fn func(*v1.Node)) {
	h.t.Helper()
	for {
		n, err := h.cs.CoreV1().Nodes().Get(h.ctx, h.nodeName(i), metav1.GetOptions{})
		if err != nil {
			h.t.Fatalf("get node: %v", err)
		}
		fn(n)
		_, err = h.cs.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			h.t.Fatalf("update node: %v", err)
		}
		return
	}
}

// names returns the sorted node names of the given indexes.
func (h *harness) names(idx ...int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, h.nodeName(i))
	}
	slices.Sort(out)
	return out
}

package nodetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
)

// ScopeLabel is set on every Node a harness creates; the harness's manager only
// sees Nodes carrying its value, so that tests never touch each other's Nodes.
const ScopeLabel = "stratus.test/scope"

// Harness is one running manager against the test API server.
type Harness struct {
	T     *testing.T
	Ctx   context.Context
	CS    kubernetes.Interface
	scope string

	mu   sync.Mutex
	uids map[string]types.UID // of the nodes CreateNode created, by name
}

// Config tunes Start.
type Config struct {
	// QPS and Burst of the manager's API client (default: the test config's).
	QPS   float32
	Burst int
	// RestConfig is the manager's identity (default: the administrator's).
	RestConfig *rest.Config
}

// Start runs a manager until the test ends, after add registered the controller
// under test with it; add must report started.
func Start(t *testing.T, cfg Config, add func(manager.Manager) (bool, error)) *Harness {
	t.Helper()
	env := testenv.Get(t)
	scope := strings.ToLower(fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), time.Now().UnixNano()%100000))
	if len(scope) > 63 {
		scope = scope[len(scope)-63:]
	}
	scope = strings.Trim(scope, "-.")
	restCfg := rest.CopyConfig(env.Config)
	if cfg.RestConfig != nil {
		restCfg = rest.CopyConfig(cfg.RestConfig)
	}
	if cfg.QPS > 0 {
		restCfg.QPS, restCfg.Burst = cfg.QPS, cfg.Burst
	}
	mgr, err := manager.New(restCfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&v1.Node{}: {Label: labels.SelectorFromSet(labels.Set{ScopeLabel: scope})},
		}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	started, err := add(mgr)
	if err != nil || !started {
		t.Fatalf("Add = %v, %v; want started", started, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	h := &Harness{T: t, Ctx: ctx, CS: env.Clientset(t), scope: scope, uids: map[string]types.UID{}}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		// Delete the test's nodes after the manager stopped.
		_ = h.CS.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: ScopeLabel + "=" + scope})
	})
	return h
}

// Scope is the value of ScopeLabel on the harness's Nodes.
func (h *Harness) Scope() string { return h.scope }

// CreateNode creates a Node in the harness's scope. Mutations may set status
// (conditions, addresses); it is written through the status subresource.
func (h *Harness) CreateNode(name string, mutate ...func(*v1.Node)) *v1.Node {
	h.T.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ScopeLabel: h.scope}}}
	for _, m := range mutate {
		m(n)
	}
	status := n.Status
	out, err := h.CS.CoreV1().Nodes().Create(h.Ctx, n, metav1.CreateOptions{})
	if err != nil {
		h.T.Fatalf("create node %s: %v", name, err)
	}
	h.mu.Lock()
	h.uids[name] = out.UID
	h.mu.Unlock()
	if len(status.Conditions) > 0 || len(status.Addresses) > 0 {
		out.Status = status
		if out, err = h.CS.CoreV1().Nodes().UpdateStatus(h.Ctx, out, metav1.UpdateOptions{}); err != nil {
			h.T.Fatalf("set status of node %s: %v", name, err)
		}
	}
	return out
}

// Node reads a Node from the API server; nil when it does not exist.
func (h *Harness) Node(name string) *v1.Node {
	h.T.Helper()
	n, err := h.CS.CoreV1().Nodes().Get(h.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.T.Fatalf("get node %s: %v", name, err)
	}
	return n
}

// UpdateNode applies mutate to the current Node (spec and metadata), retrying
// on conflict.
func (h *Harness) UpdateNode(name string, mutate func(*v1.Node)) {
	h.T.Helper()
	err := wait.PollUntilContextTimeout(h.Ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		n := h.Node(name)
		mutate(n)
		_, err := h.CS.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		h.T.Fatalf("update node %s: %v", name, err)
	}
}

// SetReady writes the node's Ready condition, retrying on conflict.
func (h *Harness) SetReady(name string, status v1.ConditionStatus, since time.Time) {
	h.T.Helper()
	err := wait.PollUntilContextTimeout(h.Ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		n := h.Node(name)
		Ready(status, since)(n)
		_, err := h.CS.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		h.T.Fatalf("set Ready of node %s: %v", name, err)
	}
}

// Eventually polls cond until it holds, failing the test after timeout.
func (h *Harness) Eventually(timeout time.Duration, what string, cond func() bool) {
	h.T.Helper()
	testsupport.Eventually(h.T, timeout, what, func(context.Context) (bool, error) { return cond(), nil })
}

// Consistently checks cond for the whole duration.
func (h *Harness) Consistently(d time.Duration, what string, cond func() bool) {
	h.T.Helper()
	testsupport.Consistently(h.T, d, what, func(context.Context) (bool, string) { return cond(), "" })
}

// Events returns the events about the Node (the one this harness created under
// that name) with the reason (any reason when empty).
func (h *Harness) Events(node, reason string) []v1.Event {
	h.T.Helper()
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node}
	h.mu.Lock()
	if uid, ok := h.uids[node]; ok {
		sel["involvedObject.uid"] = string(uid)
	}
	h.mu.Unlock()
	if reason != "" {
		sel["reason"] = reason
	}
	list, err := h.CS.CoreV1().Events(metav1.NamespaceDefault).List(h.Ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		h.T.Fatalf("list events of node %s: %v", node, err)
	}
	return list.Items
}

// HasTaint reports whether the node carries a taint with key.
func HasTaint(n *v1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// Tainted adds a taint.
func Tainted(key, value string, effect v1.TaintEffect) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// Uninitialized adds kubelet's uninitialized taint.
func Uninitialized(n *v1.Node) {
	Tainted("node.cloudprovider.kubernetes.io/uninitialized", "true", v1.TaintEffectNoSchedule)(n)
}

// WithProviderID sets spec.providerID.
func WithProviderID(id string) func(*v1.Node) {
	return func(n *v1.Node) { n.Spec.ProviderID = id }
}

// WithLabels adds labels.
func WithLabels(kv ...string) func(*v1.Node) {
	return func(n *v1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// WithAnnotation sets an annotation.
func WithAnnotation(key, value string) func(*v1.Node) {
	return func(n *v1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	}
}

// WithAddresses sets status.addresses.
func WithAddresses(addrs ...v1.NodeAddress) func(*v1.Node) {
	return func(n *v1.Node) { n.Status.Addresses = addrs }
}

// Ready sets the Ready condition with the transition time since.
func Ready(status v1.ConditionStatus, since time.Time) func(*v1.Node) {
	return func(n *v1.Node) {
		c := v1.NodeCondition{Type: v1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since)}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == v1.NodeReady {
				n.Status.Conditions[i] = c
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
}

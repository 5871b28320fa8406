package cloud

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// eventually is testsupport.Eventually for this package's conditions, which
// need no context and cannot fail.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.Eventually(t, 20*time.Second, what, func(context.Context) (bool, error) { return cond(), nil })
}

// drive advances the fake clock by step whenever something waits on it, until
// done is closed.
func drive(t *testing.T, clk *clocktesting.FakeClock, step time.Duration, done <-chan struct{}) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-done:
			return
		case <-deadline.C:
			t.Fatal("timed out driving the fake clock")
		case <-poll.C:
			if clk.HasWaiters() {
				clk.Step(step)
			}
		}
	}
}

var nameSeq atomic.Int32

// uniqueName returns a provider name no other test (or -count run) uses, so that
// metrics start from zero.
func uniqueName(base string) string { return fmt.Sprintf("%s-%d", base, nameSeq.Add(1)) }

// counter returns the current value of a counter or gauge child.
func counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// gather returns the metric of family whose provider label is provider.
func gather(t *testing.T, family, provider string) *dto.Metric {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" && l.GetValue() == provider {
					return m
				}
			}
		}
	}
	t.Fatalf("no %s{provider=%q} in the controller-runtime registry", family, provider)
	return nil
}

// countSamples returns the sample count of a histogram child.
func countSamples(t *testing.T, family, provider string) uint64 {
	return gather(t, family, provider).GetHistogram().GetSampleCount()
}

// budgetGauge returns stratus_cloud_budget_available for provider.
func budgetGauge(t *testing.T, provider string) float64 {
	return gather(t, "stratus_cloud_budget_available", provider).GetGauge().GetValue()
}

// node returns a node with the given provider ID.
func node(name, providerID string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

// scriptedLB is a LoadBalancer double whose EnsureLoadBalancer returns the queued
// errors in order, then success, and can block while gate is set.
type scriptedLB struct {
	*fake.Cloud
	mu       sync.Mutex
	errs     []error
	order    []string // names of the Services ensured, in call order
	calls    atomic.Int32
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	gate     chan struct{} // nil: do not block
}

func newScriptedLB(scheme string, errs ...error) *scriptedLB {
	return &scriptedLB{Cloud: &fake.Cloud{Provider: scheme}, errs: errs}
}

func (s *scriptedLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return s, true }

func (s *scriptedLB) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	s.calls.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxSeen.Load()
		if n <= m || s.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if svc != nil {
		s.order = append(s.order, svc.Name)
	}
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}}, nil
}

// ensured returns the names of the Services ensured so far, in order.
func (s *scriptedLB) ensured() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// listingCloud is an InstancesV2 provider double that can list its instances.
type listingCloud struct {
	*fake.Cloud
	mu        sync.Mutex
	instances []stratus.Instance
	err       error
	lists     atomic.Int32
	gate      chan struct{} // nil: do not block
}

var _ stratus.InstanceLister = (*listingCloud)(nil)

func newListingCloud(instances ...stratus.Instance) *listingCloud {
	return &listingCloud{Cloud: &fake.Cloud{Provider: "test", EnableInstancesV2: true}, instances: instances}
}

func (l *listingCloud) ListInstances(ctx context.Context) ([]stratus.Instance, error) {
	l.lists.Add(1)
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]stratus.Instance(nil), l.instances...), l.err
}

func (l *listingCloud) set(err error, instances ...stratus.Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.instances, l.err = instances, err
}

func instance(name string, shutdown bool) stratus.Instance {
	return stratus.Instance{
		Name:     name,
		Shutdown: shutdown,
		Metadata: cloudprovider.InstanceMetadata{
			ProviderID:    "test://" + name,
			InstanceType:  "small",
			Zone:          "zone-a",
			Region:        "region-1",
			NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}},
		},
	}
}

package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// testLB is a load balancer in testCloud.
type testLB struct {
	svc     types.NamespacedName
	uid     types.UID
	cluster string
	ip      string
	ipMode  *v1.LoadBalancerIPMode
	hosts   []string
	readyAt time.Time // provisioning ends
	// lastSvc is the Service object of the last Ensure.
	lastSvc *v1.Service
	// lastWrite is the Service object of the last Ensure or Update that
	// wrote the load balancer (a provider's update may rewrite it whole).
	lastWrite *v1.Service
}

// testCloud is a concurrency-safe load-balancer cloud for the tests. It embeds
// fake.Cloud for everything but load balancers.
type testCloud struct {
	*fake.Cloud

	mu    sync.Mutex
	lbs   map[string]*testLB // by load balancer name
	calls map[string]int     // "ensure", "update", "delete", "get", "list"
	// ensureTimes records when each Ensure call started, per load balancer name.
	ensureTimes map[string][]time.Time
	nextIP      int

	// Knobs, set before the controller starts or under mu.
	provisioning time.Duration // LBs become ready this long after creation
	retryAfter   time.Duration // RetryError delay while provisioning
	ensureErrs   []error       // returned (and consumed) by the next Ensure calls
	updateErrs   []error       // returned (and consumed) by the next Update calls
	elsewhere    bool          // Ensure and Update return ImplementedElsewhere
	updateDelay  time.Duration // how long an Update takes (a slow cloud)
	ipMode       *v1.LoadBalancerIPMode
	extraIngress string // a second ingress IP (dual-stack providers)
	// maxProvisioning is the most load balancers seen provisioning at once.
	maxProvisioning int
}

func newTestCloud() *testCloud {
	return &testCloud{
		Cloud:       &fake.Cloud{Provider: "fake", Zone: cloudprovider.Zone{Region: "region-1", FailureDomain: "zone-a"}},
		lbs:         map[string]*testLB{},
		calls:       map[string]int{},
		ensureTimes: map[string][]time.Time{},
	}
}

// LoadBalancer returns the test cloud itself.
func (c *testCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

// GetLoadBalancerName is upstream's default name.
func (c *testCloud) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

func (c *testCloud) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func popErr(errs *[]error) error {
	if len(*errs) == 0 {
		return nil
	}
	err := (*errs)[0]
	*errs = (*errs)[1:]
	return err
}

func (lb *testLB) status() *v1.LoadBalancerStatus {
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.ip, IPMode: lb.ipMode}}}
}

// GetLoadBalancer reports the load balancer once it finished provisioning.
func (c *testCloud) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["get"]++
	lb, ok := c.lbs[cloudprovider.DefaultLoadBalancerName(svc)]
	if !ok {
		return nil, false, nil
	}
	return lb.status(), true, nil
}

// EnsureLoadBalancer creates or updates the load balancer; while it provisions it
// returns a RetryError.
func (c *testCloud) EnsureLoadBalancer(_ context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["ensure"]++
	name := cloudprovider.DefaultLoadBalancerName(svc)
	now := time.Now()
	c.ensureTimes[name] = append(c.ensureTimes[name], now)
	if err := popErr(&c.ensureErrs); err != nil {
		return nil, err
	}
	if c.elsewhere {
		return nil, cloudprovider.ImplementedElsewhere
	}
	lb, ok := c.lbs[name]
	if !ok {
		c.nextIP++
		lb = &testLB{ip: fmt.Sprintf("203.0.113.%d", c.nextIP), readyAt: now.Add(c.provisioning)}
		c.lbs[name] = lb
	}
	lb.svc, lb.uid, lb.cluster = types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, svc.UID, cluster
	lb.ipMode, lb.hosts, lb.lastSvc, lb.lastWrite = c.ipMode, hostNames(nodes), svc.DeepCopy(), svc.DeepCopy()
	provisioning := 0
	for _, l := range c.lbs {
		if now.Before(l.readyAt) {
			provisioning++
		}
	}
	c.maxProvisioning = max(c.maxProvisioning, provisioning)
	if now.Before(lb.readyAt) {
		return nil, cloudproviderapi.NewRetryError("load balancer is provisioning", c.retryAfter)
	}
	return c.ensuredStatus(lb), nil
}

// ensuredStatus is what Ensure answers for a ready load balancer; c.mu is held.
func (c *testCloud) ensuredStatus(lb *testLB) *v1.LoadBalancerStatus {
	st := lb.status()
	if lb.lastSvc == nil { // seeded by a test, never ensured
		return st
	}
	for _, p := range lb.lastSvc.Spec.Ports {
		st.Ingress[0].Ports = append(st.Ingress[0].Ports, v1.PortStatus{Port: p.Port, Protocol: p.Protocol})
	}
	if c.extraIngress != "" {
		st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: c.extraIngress, IPMode: c.ipMode})
	}
	return st
}

// UpdateLoadBalancer replaces the load balancer's hosts, taking updateDelay
// (during which other calls proceed).
func (c *testCloud) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	c.mu.Lock()
	c.calls["update-started"]++
	delay := c.updateDelay
	c.mu.Unlock()
	if delay > 0 {
		select { // the cloud's latency, not a synchronization
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["update"]++
	if err := popErr(&c.updateErrs); err != nil {
		return err
	}
	if c.elsewhere {
		return cloudprovider.ImplementedElsewhere
	}
	lb, ok := c.lbs[cloudprovider.DefaultLoadBalancerName(svc)]
	if !ok {
		return fmt.Errorf("load balancer %s not found", cloudprovider.DefaultLoadBalancerName(svc))
	}
	lb.hosts, lb.lastWrite = hostNames(nodes), svc.DeepCopy()
	return nil
}

// EnsureLoadBalancerDeleted deletes the load balancer.
func (c *testCloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["delete"]++
	delete(c.lbs, cloudprovider.DefaultLoadBalancerName(svc))
	return nil
}

// lb returns a copy of the load balancer of svc, if it exists.
func (c *testCloud) lb(svc *v1.Service) (testLB, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.lbs[cloudprovider.DefaultLoadBalancerName(svc)]
	if !ok {
		return testLB{}, false
	}
	return *lb, true
}

// hosts returns the hosts of svc's load balancer (nil when it does not exist).
func (c *testCloud) hosts(svc *v1.Service) []string {
	lb, _ := c.lb(svc)
	return lb.hosts
}

// put adds a load balancer as if something created it.
func (c *testCloud) put(name string, lb testLB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lbs[name] = &lb
}

func (c *testCloud) exists(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.lbs[name]
	return ok
}

func (c *testCloud) set(fn func(c *testCloud)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c)
}

func hostNames(nodes []*v1.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

// listingCloud is a testCloud whose load balancers can be listed: those of the
// asked cluster only (foreign ones carry another cluster name).
type listingCloud struct{ *testCloud }

var _ stratus.LoadBalancerLister = listingCloud{}

// ListLoadBalancers lists the load balancers tagged with cluster: those still
// provisioning as such, the others with the status Ensure would answer.
func (c listingCloud) ListLoadBalancers(_ context.Context, cluster string) ([]stratus.LoadBalancerRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["list"]++
	now := time.Now()
	var out []stratus.LoadBalancerRef
	for name, lb := range c.lbs {
		if lb.cluster != cluster {
			continue
		}
		ref := stratus.LoadBalancerRef{Name: name, ServiceNamespace: lb.svc.Namespace, ServiceName: lb.svc.Name, ServiceUID: lb.uid}
		if now.Before(lb.readyAt) {
			ref.Provisioning = true
		} else {
			ref.Status = c.ensuredStatus(lb)
		}
		out = append(out, ref)
	}
	return out, nil
}

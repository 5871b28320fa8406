package cloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Provider is one configured provider as the controllers see it. It implements
// cloudprovider.Interface; every call goes through the layer: the provider's request
// budget at the context's priority (WithPriority), retries of throttled and
// transient errors, metrics labelled with the configured name, and, for instance
// questions, the instance cache when the provider can list its instances.
type Provider struct {
	name   string
	raw    cloudprovider.Interface
	scheme string

	clock        clock.Clock
	budget       *budget
	maxRetries   int
	retryBackoff time.Duration
	cache        *instanceCache // nil when the provider cannot list instances
	reads        singleflight.Group
	coalescing   atomic.Int32 // callers inside coalesce (observed by tests)
	obs          observers
}

var _ cloudprovider.Interface = (*Provider)(nil)

// Option configures a Provider.
type Option func(*providerOptions)

type providerOptions struct {
	budget    *BudgetConfig
	clock     clock.Clock
	freshness time.Duration
}

// WithBudget sets the provider's request budget; zero fields take the defaults
// (DefaultRate, DefaultBurst, DefaultMaxConcurrent, DefaultMaxRetries).
func WithBudget(b BudgetConfig) Option {
	return func(o *providerOptions) { o.budget = &b }
}

// WithClock sets the clock of the budget, retries and cache (tests use a fake one).
func WithClock(c clock.Clock) Option {
	return func(o *providerOptions) { o.clock = c }
}

// WithInstanceCacheFreshness sets how long an instance listing answers instance
// questions before it is listed again (default DefaultInstanceCacheFreshness).
func WithInstanceCacheFreshness(d time.Duration) Option {
	return func(o *providerOptions) { o.freshness = d }
}

// NewProvider wraps raw, the provider a registered factory returned, under the
// configured name. Without WithBudget the provider has no rate limit and no
// concurrency cap (throttled and transient errors are still retried); Build always
// sets the configured or default budget.
func NewProvider(name string, raw cloudprovider.Interface, opts ...Option) *Provider {
	o := providerOptions{clock: clock.RealClock{}, freshness: DefaultInstanceCacheFreshness}
	for _, opt := range opts {
		opt(&o)
	}
	b := BudgetConfig{}.withDefaults()
	b.Rate, b.MaxConcurrent = 0, 0
	if o.budget != nil {
		b = o.budget.withDefaults()
	}
	p := &Provider{
		name:         name,
		raw:          raw,
		scheme:       raw.ProviderName(),
		clock:        o.clock,
		budget:       newBudget(o.clock, b.Rate, b.Burst, b.MaxConcurrent),
		maxRetries:   max(b.MaxRetries, 0),
		retryBackoff: defaultRetryBackoff,
	}
	if _, ok := p.instanceLister(); ok {
		p.cache = newInstanceCache(p, o.freshness)
	}
	budgets.track(name, p)
	// At 0 from the start, so that their rates are 0 rather than absent.
	throttledTotal.WithLabelValues(name)
	recoveries.WithLabelValues(name)
	return p
}

// Name is the provider's name in the manager configuration (for logs and metrics).
func (p *Provider) Name() string { return p.name }

// Raw returns the unwrapped provider. Only the manager uses it, to hand the provider
// its client builder and informers.
func (p *Provider) Raw() cloudprovider.Interface { return p.raw }

// Initialize passes through to the provider.
func (p *Provider) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	p.raw.Initialize(b, stop)
}

// LoadBalancer returns the provider's load balancers, through the layer. A
// RetryError from EnsureLoadBalancer reaches the caller unchanged.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	lb, ok := p.raw.LoadBalancer()
	if !ok || lb == nil {
		return lb, ok
	}
	return &loadBalancer{p: p, raw: lb}, true
}

// Instances returns the provider's Instances (v1), through the layer.
func (p *Provider) Instances() (cloudprovider.Instances, bool) {
	inst, ok := p.raw.Instances()
	if !ok || inst == nil {
		return inst, ok
	}
	return &instances{p: p, raw: inst}, true
}

// InstancesV2 returns the provider's InstancesV2, through the layer: its methods
// are Provider's InstanceExists, InstanceShutdown and InstanceMetadata (served from
// the instance cache when the provider can list instances).
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if _, ok := p.instancesV2(); !ok {
		return nil, false
	}
	return instancesV2{p}, true
}

// Zones returns the provider's Zones, through the layer.
func (p *Provider) Zones() (cloudprovider.Zones, bool) {
	z, ok := p.raw.Zones()
	if !ok || z == nil {
		return z, ok
	}
	return &zones{p: p, raw: z}, true
}

// Clusters returns the provider's Clusters, through the layer.
func (p *Provider) Clusters() (cloudprovider.Clusters, bool) {
	c, ok := p.raw.Clusters()
	if !ok || c == nil {
		return c, ok
	}
	return &clusters{p: p, raw: c}, true
}

// Routes returns the provider's Routes, through the layer.
func (p *Provider) Routes() (cloudprovider.Routes, bool) {
	r, ok := p.raw.Routes()
	if !ok || r == nil {
		return r, ok
	}
	return &routes{p: p, raw: r}, true
}

// ProviderName returns the provider's own name, the scheme of its provider IDs.
func (p *Provider) ProviderName() string { return p.scheme }

// HasClusterID passes through to the provider.
func (p *Provider) HasClusterID() bool { return p.raw.HasClusterID() }

// instancesV2 follows upstream: InstancesV2 counts only when it is supported and
// not nil.
func (p *Provider) instancesV2() (cloudprovider.InstancesV2, bool) {
	v2, ok := p.raw.InstancesV2()
	return v2, ok && v2 != nil
}

// HasInstances reports whether the provider supports InstancesV2 or Instances, the
// condition for running the node controllers on it.
func (p *Provider) HasInstances() bool {
	if _, ok := p.instancesV2(); ok {
		return true
	}
	_, ok := p.raw.Instances()
	return ok
}

// ErrEmptyListing is returned for instance questions while the provider's instance
// listing came back empty. A cloud API outage often looks like an empty list, and a
// node whose instance "does not exist" may be deleted, so an empty listing answers
// nothing: callers treat ErrEmptyListing like any other error (skip, retry later).
var ErrEmptyListing = errors.New("the provider's instance listing is empty")

// InstanceMetadata returns the metadata of the node's instance. When the provider
// can list instances it is served from the instance cache (InstanceNotFound when a
// listing recent enough for the node lacks it, ErrEmptyListing when the listing is
// empty); otherwise through InstancesV2, or assembled from Instances (v1) and Zones
// with upstream's fallbacks from provider-ID to node-name lookups. It returns (nil,
// nil) when an InstancesV2 provider returns no metadata. Identical concurrent
// requests are coalesced into one cloud call.
func (p *Provider) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	md, err := p.instanceMetadata(ctx, node)
	return md, p.nodeErr("get instance metadata", node, err)
}

// nodeErr names the provider, the question and the node in err, once for the
// whole call: the layers below name only what they add.
func (p *Provider) nodeErr(what string, node *v1.Node, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("provider %s: %s of node %s: %w", p.name, what, node.Name, err)
}

func (p *Provider) instanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if p.cache != nil {
		inst, err := p.cache.lookup(ctx, node)
		if err != nil {
			return nil, err
		}
		if inst == nil {
			return nil, cloudprovider.InstanceNotFound
		}
		if inst.MetadataErr != nil {
			return nil, inst.MetadataErr
		}
		return copyMetadata(&inst.Metadata), nil
	}
	md, err := coalesce(ctx, p, "InstanceMetadata", node, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
		if v2, ok := p.instancesV2(); ok {
			return call(ctx, p, "InstanceMetadata", func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
				return v2.InstanceMetadata(ctx, node)
			})
		}
		return p.metadataV1(ctx, node)
	})
	return copyMetadata(md), err
}

// copyMetadata returns a copy the caller may modify (coalesced and cached results
// are shared).
func copyMetadata(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
	if md == nil {
		return nil
	}
	c := *md
	c.NodeAddresses = slices.Clone(md.NodeAddresses)
	c.AdditionalLabels = maps.Clone(md.AdditionalLabels)
	return &c
}

// coalesce runs fn once for identical concurrent requests (same method, node and
// priority).
func coalesce[T any](ctx context.Context, p *Provider, method string, node *v1.Node, fn func(context.Context) (T, error)) (T, error) {
	p.coalescing.Add(1)
	defer p.coalescing.Add(-1)
	return shared(ctx, &p.reads, method+"\x00"+node.Name+"\x00"+node.Spec.ProviderID, fn)
}

// noInstances is the error for instance questions to a provider without Instances.
func (p *Provider) noInstances() error {
	return errors.New("the provider supports neither Instances nor InstancesV2")
}

func (p *Provider) metadataV1(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, ok := p.Instances()
	if !ok {
		return nil, p.noInstances()
	}
	name := types.NodeName(node.Name)
	providerID := node.Spec.ProviderID
	if providerID == "" {
		id, err := cloudprovider.GetInstanceProviderID(ctx, p, name)
		switch {
		case err == nil:
			providerID = id
		case errors.Is(err, cloudprovider.NotImplemented):
			// Tolerated: name-based lookups follow.
		default:
			return nil, fmt.Errorf("get provider ID: %w", err)
		}
	}
	md := &cloudprovider.InstanceMetadata{ProviderID: providerID}

	var err error
	if providerID != "" {
		md.NodeAddresses, err = inst.NodeAddressesByProviderID(ctx, providerID)
	}
	if providerID == "" || err != nil {
		if md.NodeAddresses, err = inst.NodeAddresses(ctx, name); err != nil {
			return nil, fmt.Errorf("get addresses: %w", err)
		}
	}
	err = nil
	if providerID != "" {
		md.InstanceType, err = inst.InstanceTypeByProviderID(ctx, providerID)
	}
	if providerID == "" || err != nil {
		if md.InstanceType, err = inst.InstanceType(ctx, name); err != nil {
			return nil, fmt.Errorf("get instance type: %w", err)
		}
	}
	if zones, ok := p.Zones(); ok {
		var zone cloudprovider.Zone
		err = nil
		if providerID != "" {
			zone, err = zones.GetZoneByProviderID(ctx, providerID)
		}
		if providerID == "" || err != nil {
			if zone, err = zones.GetZoneByNodeName(ctx, name); err != nil {
				return nil, fmt.Errorf("get zone: %w", err)
			}
		}
		md.Zone, md.Region = zone.FailureDomain, zone.Region
	}
	return md, nil
}

// InstanceExists reports whether the node's instance exists (a stopped instance
// exists). When the provider can list instances, the answer comes from the
// instance cache: a failed listing is an error, never "does not exist", and an
// empty listing gives ErrEmptyListing. Otherwise it asks InstancesV2, or Instances
// (v1), where a node without provider ID is looked up by name and InstanceNotFound
// counts as "does not exist".
func (p *Provider) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	if p.cache != nil {
		inst, err := p.cache.lookup(ctx, node)
		return inst != nil, p.nodeErr("check the instance", node, err)
	}
	exists, err := p.instanceExists(ctx, node)
	if err == nil {
		p.observeExists(node, exists)
	}
	return exists, p.nodeErr("check the instance", node, err)
}

// instanceExists asks a provider that cannot list.
func (p *Provider) instanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	if v2, ok := p.instancesV2(); ok {
		return coalesce(ctx, p, "InstanceExists", node, func(ctx context.Context) (bool, error) {
			return call(ctx, p, "InstanceExists", func(ctx context.Context) (bool, error) {
				return v2.InstanceExists(ctx, node)
			})
		})
	}
	inst, ok := p.Instances()
	if !ok {
		return false, p.noInstances()
	}
	providerID, err := p.providerIDV1(ctx, node)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return inst.InstanceExistsByProviderID(ctx, providerID)
}

// InstanceShutdown reports whether the node's instance is shut down. From the
// instance cache, an instance missing from the listing is "not shut down" (the
// existence check decides about it) and an empty listing gives ErrEmptyListing.
// With Instances (v1), NotImplemented and a provider-ID lookup that finds no
// instance mean "not shut down".
func (p *Provider) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	down, err := p.instanceShutdown(ctx, node)
	return down, p.nodeErr("check shutdown", node, err)
}

func (p *Provider) instanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	if p.cache != nil {
		inst, err := p.cache.lookup(ctx, node)
		return inst != nil && inst.Shutdown, err
	}
	if v2, ok := p.instancesV2(); ok {
		return coalesce(ctx, p, "InstanceShutdown", node, func(ctx context.Context) (bool, error) {
			return call(ctx, p, "InstanceShutdown", func(ctx context.Context) (bool, error) {
				return v2.InstanceShutdown(ctx, node)
			})
		})
	}
	inst, ok := p.Instances()
	if !ok {
		return false, p.noInstances()
	}
	providerID, err := p.providerIDV1(ctx, node)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	down, err := inst.InstanceShutdownByProviderID(ctx, providerID)
	if errors.Is(err, cloudprovider.NotImplemented) {
		return false, nil
	}
	return down, err
}

func (p *Provider) providerIDV1(ctx context.Context, node *v1.Node) (string, error) {
	if node.Spec.ProviderID != "" {
		return node.Spec.ProviderID, nil
	}
	return cloudprovider.GetInstanceProviderID(ctx, p, types.NodeName(node.Name))
}

// ListInstances lists all instances when the provider, or its InstancesV2,
// implements stratus.InstanceLister; ok is false when it does not. The listing is the
// instance cache's: no older than its freshness window, and shared with concurrent
// callers (one cloud listing for all).
func (p *Provider) ListInstances(ctx context.Context) (instances []stratus.Instance, ok bool, err error) {
	if p.cache == nil {
		return nil, false, nil
	}
	snap, err := p.cache.current(ctx)
	if err != nil {
		return nil, true, fmt.Errorf("provider %s: %w", p.name, err)
	}
	return snap.instances(), true, nil
}

func (p *Provider) instanceLister() (stratus.InstanceLister, bool) {
	if l, ok := p.raw.(stratus.InstanceLister); ok {
		return l, true
	}
	if v2, ok := p.instancesV2(); ok {
		if l, ok := v2.(stratus.InstanceLister); ok {
			return l, true
		}
	}
	return nil, false
}

// ListLoadBalancers lists the load balancers the provider created for clusterName
// when the provider, or its LoadBalancer, implements stratus.LoadBalancerLister; ok is
// false when it does not. The call goes through the request budget.
func (p *Provider) ListLoadBalancers(ctx context.Context, clusterName string) (lbs []stratus.LoadBalancerRef, ok bool, err error) {
	var lister stratus.LoadBalancerLister
	if l, isLister := p.raw.(stratus.LoadBalancerLister); isLister {
		lister = l
	} else if lb, supported := p.raw.LoadBalancer(); supported {
		lister, _ = lb.(stratus.LoadBalancerLister)
	}
	if lister == nil {
		return nil, false, nil
	}
	lbs, err = call(ctx, p, "ListLoadBalancers", func(ctx context.Context) ([]stratus.LoadBalancerRef, error) {
		return lister.ListLoadBalancers(ctx, clusterName)
	})
	return lbs, true, err
}

// BackendsDigest is the provider's stratus.BackendsDigester answer for svc's
// load balancer serving nodes, when the provider, or its LoadBalancer,
// implements it; ok is false when it does not or cannot tell. It makes no
// cloud call.
func (p *Provider) BackendsDigest(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (digest string, ok bool) {
	d, isDigester := p.raw.(stratus.BackendsDigester)
	if !isDigester {
		if lb, supported := p.raw.LoadBalancer(); supported {
			d, isDigester = lb.(stratus.BackendsDigester)
		}
	}
	if !isDigester {
		return "", false
	}
	return d.BackendsDigest(ctx, clusterName, svc, nodes)
}

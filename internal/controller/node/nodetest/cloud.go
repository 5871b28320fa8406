// Package nodetest holds the test doubles and helpers shared by the integration
// tests of the node and node lifecycle controllers: a concurrency-safe InstancesV2
// cloud with per-instance state and call counts (optionally listing its instances
// through pkg/stratus.InstanceLister), and a harness that runs a manager
// against the test API server, scoped to the test's own Nodes.
package nodetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Cloud is an InstancesV2 provider whose instances tests change while
// controllers run. Instances are keyed by node name; a node with a provider ID is
// matched by it. The embedded fake.Cloud answers everything else.
type Cloud struct {
	*fake.Cloud

	mu          sync.Mutex
	name        string
	instances   map[string]*Instance
	metadataErr error
	nilMetadata bool
	listErr     error
	calls       map[string]int
	times       map[string][]time.Time
}

// Instance is one machine of Cloud.
type Instance struct {
	Metadata cloudprovider.InstanceMetadata
	Shutdown bool
}

// NewCloud returns an empty cloud whose provider IDs have the scheme name.
func NewCloud(name string) *Cloud {
	return &Cloud{
		Cloud:     &fake.Cloud{Provider: name, DisableRoutes: true, DisableLoadBalancers: true},
		name:      name,
		instances: map[string]*Instance{},
		calls:     map[string]int{},
		times:     map[string][]time.Time{},
	}
}

// Listing returns c as a provider that also implements stratus.InstanceLister.
func (c *Cloud) Listing() *ListingCloud { return &ListingCloud{c} }

// ListingCloud is a Cloud that can list its instances.
type ListingCloud struct{ *Cloud }

var _ stratus.InstanceLister = (*ListingCloud)(nil)

// ListInstances lists every instance, or fails with the error set by SetListError.
func (c *ListingCloud) ListInstances(context.Context) ([]stratus.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("ListInstances")
	if c.listErr != nil {
		return nil, c.listErr
	}
	out := make([]stratus.Instance, 0, len(c.instances))
	for name, inst := range c.instances {
		out = append(out, stratus.Instance{Name: name, Metadata: inst.Metadata, Shutdown: inst.Shutdown})
	}
	return out, nil
}

// ProviderName is the scheme of the cloud's provider IDs.
func (c *Cloud) ProviderName() string { return c.name }

// InstancesV2 returns c.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// ProviderID returns the provider ID Cloud gives the instance name.
func (c *Cloud) ProviderID(name string) string { return fmt.Sprintf("%s://%s", c.name, name) }

// AddInstance adds (or replaces) the machine of node name; an empty
// md.ProviderID is filled with ProviderID(name) unless keepEmptyID is set.
func (c *Cloud) AddInstance(name string, md cloudprovider.InstanceMetadata) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if md.ProviderID == "" {
		md.ProviderID = c.ProviderID(name)
	}
	c.instances[name] = &Instance{Metadata: md}
}

// SetMetadata replaces the metadata of an instance, keeping it as given (an empty
// provider ID stays empty).
func (c *Cloud) SetMetadata(name string, md cloudprovider.InstanceMetadata) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[name]
	if !ok {
		inst = &Instance{}
		c.instances[name] = inst
	}
	inst.Metadata = md
}

// RemoveInstance deletes the machine of node name.
func (c *Cloud) RemoveInstance(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.instances, name)
}

// SetShutdown powers the machine of node name off (true) or on.
func (c *Cloud) SetShutdown(name string, down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inst, ok := c.instances[name]; ok {
		inst.Shutdown = down
	}
}

// SetMetadataError makes InstanceMetadata fail with err (nil: succeed).
func (c *Cloud) SetMetadataError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.metadataErr = err
}

// SetNilMetadata makes InstanceMetadata return (nil, nil).
func (c *Cloud) SetNilMetadata(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nilMetadata = on
}

// SetListError makes ListInstances fail with err (nil: succeed).
func (c *Cloud) SetListError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listErr = err
}

// Calls returns how often method was called; "InstanceMetadata/<node>" counts the
// metadata calls about one node.
func (c *Cloud) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// CallTimes returns when method was called (keys as for Calls), oldest first.
func (c *Cloud) CallTimes(method string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.times[method])
}

// count records a call of method; c.mu is held.
func (c *Cloud) count(method string) {
	c.calls[method]++
	c.times[method] = append(c.times[method], time.Now())
}

// TotalCalls returns the number of calls of every method.
func (c *Cloud) TotalCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.calls {
		if !strings.Contains(k, "/") {
			n += v
		}
	}
	return n
}

// find returns the node's instance, by provider ID, else by name; c.mu is held.
func (c *Cloud) find(node *v1.Node) *Instance {
	if node.Spec.ProviderID != "" {
		for _, inst := range c.instances {
			if inst.Metadata.ProviderID == node.Spec.ProviderID {
				return inst
			}
		}
	}
	return c.instances[node.Name]
}

// InstanceMetadata returns a copy of the node's instance metadata, or
// InstanceNotFound.
func (c *Cloud) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("InstanceMetadata")
	c.count("InstanceMetadata/" + node.Name)
	switch {
	case c.metadataErr != nil:
		return nil, c.metadataErr
	case c.nilMetadata:
		return nil, nil
	}
	inst := c.find(node)
	if inst == nil {
		return nil, cloudprovider.InstanceNotFound
	}
	md := inst.Metadata
	md.NodeAddresses = append([]v1.NodeAddress(nil), md.NodeAddresses...)
	return &md, nil
}

// InstanceExists reports whether the node's instance exists.
func (c *Cloud) InstanceExists(_ context.Context, node *v1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("InstanceExists")
	return c.find(node) != nil, nil
}

// InstanceShutdown reports whether the node's instance is shut down.
func (c *Cloud) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("InstanceShutdown")
	inst := c.find(node)
	return inst != nil && inst.Shutdown, nil
}

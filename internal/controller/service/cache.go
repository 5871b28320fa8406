package service

import (
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// nodeSet is a backend set as compared between syncs: node name -> spec.providerID
// (upstream's "sufficiently equal" test).
type nodeSet map[string]string

func newNodeSet(nodes []*v1.Node) nodeSet {
	s := make(nodeSet, len(nodes))
	for _, n := range nodes {
		s[n.Name] = n.Spec.ProviderID
	}
	return s
}

// svcState is what the controller remembers of a Service it synced, the state
// its plans (plan.go) start from: the last-seen object (to delete its load
// balancer when the Service vanished without our finalizer, or was recreated
// with a new UID), its provider, where its load balancer stands (phase), and
// the backend set its load balancer was last given.
type svcState struct {
	svc      *v1.Service
	provider *cloud.Provider
	// phase is where this incarnation's load balancer stands.
	phase phase
	// nodes is the backend set last sent to the cloud (nil before the first sync).
	nodes nodeSet
	// poolKeys are the keys of the backend pools the load balancer was
	// last sent (poolKeysOf) when its provider's pools serve it; "" when
	// they do not, or nobody knows (its last update failed).
	poolKeys string
	// unverified is true for a load balancer adopted at start-up whose
	// backends nobody sent yet: nodes is then the current set, not what the
	// load balancer has, and the next backend pass sends it whatever it is.
	unverified bool
	// ensuredSvc is the Service as last successfully ensured (or adopted).
	ensuredSvc *v1.Service
	// firstEnsure is when this incarnation was first ensured, for the
	// provisioning-latency metric.
	firstEnsure time.Time
	// provisioning is set while an Ensure answered RetryError (still
	// provisioning), whatever the phase: an ensured load balancer being
	// changed provisions too.
	provisioning provisioningWait
	// failed is true while the Service's last sync ended in an error; when
	// its provider recovers from an outage, such Services are synced at once
	// instead of when their backoff ends.
	failed bool
}

// ensuredFrom records svc as the Service last ensured. The remembered copy
// serves when it asks the same of its load balancer (as it does unless the
// Service changed during the sync): one copy per Service instead of two.
func (e *svcState) ensuredFrom(svc *v1.Service) {
	if e.svc != nil && e.svc.UID == svc.UID && !needsUpdate(e.svc, svc) {
		e.ensuredSvc = e.svc
		return
	}
	e.ensuredSvc = svc.DeepCopy()
}

// serviceCache is the in-memory cache of synced Services, keyed by namespace/name.
// Entries are copied in and out under the lock; callers never share them.
type serviceCache struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*svcState
}

func newServiceCache() *serviceCache {
	return &serviceCache{m: map[types.NamespacedName]*svcState{}}
}

// get returns a copy of the entry for key.
func (c *serviceCache) get(key types.NamespacedName) (svcState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return svcState{}, false
	}
	return *e, true
}

// update applies fn to the entry for key, creating an empty one first if needed.
func (c *serviceCache) update(key types.NamespacedName, fn func(*svcState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		e = &svcState{}
		c.m[key] = e
	}
	fn(e)
}

// remember records svc (a private copy) as the last-seen object of its key. A
// different UID starts a new incarnation.
func (c *serviceCache) remember(svc *v1.Service, p *cloud.Provider) {
	c.update(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, func(e *svcState) {
		if e.svc != nil && e.svc.UID != svc.UID {
			*e = svcState{}
		}
		e.svc, e.provider = svc, p
	})
}

func (c *serviceCache) delete(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// swapNodes records set (and poolKeys, the keys of the pools it is in, ""
// when not pooled) as key's backend set if the entry is an ensured load
// balancer of uid whose recorded set differs or is unverified; it returns the
// entry as it was and whether the set is to be sent. Recording before the cloud
// call keeps a concurrent pass from sending the same update twice.
func (c *serviceCache) swapNodes(key types.NamespacedName, uid types.UID, set nodeSet, poolKeys string) (svcState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || e.svc == nil || e.svc.UID != uid || e.phase != phaseEnsured || (!e.unverified && maps.Equal(e.nodes, set) && e.poolKeys == poolKeys) {
		return svcState{}, false
	}
	old := *e
	e.nodes, e.unverified, e.poolKeys = set, false, poolKeys
	return old, true
}

// sharedSets hands out node sets so that equal ones are one map: a thousand
// Services on five thousand nodes would otherwise keep a thousand copies.
// Sets are never modified once made.
type sharedSets struct {
	mu   sync.Mutex
	last nodeSet
}

// share returns s, or the previously shared set when it is equal.
func (c *sharedSets) share(s nodeSet) nodeSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && maps.Equal(c.last, s) {
		return c.last
	}
	c.last = s
	return s
}

// removes reports whether going from old to new takes a backend away: a node
// of old missing from new, or one whose provider ID changed.
func (old nodeSet) removes(new nodeSet) bool {
	for name, id := range old {
		if nid, ok := new[name]; !ok || (id != "" && nid != id) {
			return true
		}
	}
	return false
}

// nodesOf returns the backend set last sent for key (nil when none).
func (c *serviceCache) nodesOf(key types.NamespacedName) nodeSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		return e.nodes
	}
	return nil
}

// setFailed records whether key's last sync failed; it creates no entry.
func (c *serviceCache) setFailed(key types.NamespacedName, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		e.failed = failed
	}
}

// failedOf returns the keys of the Services served by p whose last sync failed.
func (c *serviceCache) failedOf(p *cloud.Provider) []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []types.NamespacedName
	for k, e := range c.m {
		if e.failed && e.provider == p {
			out = append(out, k)
		}
	}
	return out
}

// keys returns the keys of all entries.
func (c *serviceCache) keys() []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(c.m))
	for k := range c.m {
		out = append(out, k)
	}
	return out
}

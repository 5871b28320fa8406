package cloud

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Change is something a provider's layer learned that can change a controller's
// decision although no Kubernetes object changed.
type Change int

const (
	// InstancesChanged: the provider's instances are not what the previous
	// listing said (an instance appeared, disappeared, stopped or started), or
	// an instance check found an instance gone or back. KnownGone may answer
	// differently now.
	InstancesChanged Change = iota + 1
	// Recovered: the provider answered again after an outage (outageCalls
	// calls in a row failed with transient or throttling errors, then one
	// succeeded). What failed because of the outage can be retried now rather
	// than when its backoff ends.
	Recovered
)

// String names the change (for logs).
func (c Change) String() string {
	switch c {
	case InstancesChanged:
		return "InstancesChanged"
	case Recovered:
		return "Recovered"
	}
	return "Change(?)"
}

// outageCalls is how many calls in a row must fail with transient or throttling
// errors before the provider counts as down. One failing call is not an outage:
// a Service whose own load balancer keeps failing must not make every success
// of other calls look like a recovery.
const outageCalls = 3

// observers is a provider's subscribers and the state they are told about.
type observers struct {
	mu    sync.Mutex
	fns   []func(Change)
	fails int // calls in a row that failed with transient or throttling errors

	// gone is the set of provider IDs whose instance an InstanceExists call
	// (for providers that cannot list) last found missing.
	gone map[string]bool
}

// Subscribe registers fn to be told about p's changes. fn is called from the
// goroutine that learned the change and must not block (enqueue work and
// return). Subscribe before the manager starts.
func (p *Provider) Subscribe(fn func(Change)) {
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	p.obs.fns = append(p.obs.fns, fn)
}

// Subscribe registers fn with every provider of the set (see Provider.Subscribe).
func (s *Set) Subscribe(fn func(*Provider, Change)) {
	for _, p := range s.providers {
		p.Subscribe(func(c Change) { fn(p, c) })
	}
}

func (p *Provider) notify(c Change) {
	p.obs.mu.Lock()
	fns := slices.Clone(p.obs.fns)
	p.obs.mu.Unlock()
	for _, fn := range fns {
		fn(c)
	}
}

// observeOutcome records the final outcome of one call (after the layer's
// retries) and tells the subscribers when it ends an outage.
func (p *Provider) observeOutcome(err error) {
	down := false
	switch outcome(err) {
	case OutcomeSuccess, OutcomeNotFound, OutcomeNotImplemented, OutcomeImplementedElsewhere, OutcomeRetryLater:
		// The provider answered.
	case OutcomeTransient, OutcomeThrottled:
		down = true
	default:
		return // an answer about this call's object, or the caller went away: says nothing about the provider
	}
	p.obs.mu.Lock()
	recovered := !down && p.obs.fails >= outageCalls
	if down {
		p.obs.fails++
	} else {
		p.obs.fails = 0
	}
	p.obs.mu.Unlock()
	if recovered {
		recoveries.WithLabelValues(p.name).Inc()
		p.notify(Recovered)
	}
}

// down reports whether p is in an outage: its last outageCalls calls or more
// failed with transient or throttling errors.
func (p *Provider) down() bool {
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	return p.obs.fails >= outageCalls
}

// observeExists records the answer of an InstanceExists call to a provider that
// cannot list, for KnownGone.
func (p *Provider) observeExists(node *v1.Node, exists bool) {
	id := node.Spec.ProviderID
	if id == "" {
		return
	}
	p.obs.mu.Lock()
	changed := p.obs.gone[id] == exists
	switch {
	case !exists && p.obs.gone == nil:
		p.obs.gone = map[string]bool{id: true}
	case !exists:
		p.obs.gone[id] = true
	default:
		delete(p.obs.gone, id)
	}
	p.obs.mu.Unlock()
	if changed {
		p.notify(InstancesChanged)
	}
}

// KnownGone reports whether the layer already knows, without asking the cloud,
// that the instance of node (which has a provider ID) does not exist: the latest
// instance listing, taken after the node was created and not empty, lacks it, or
// for a provider that cannot list, the latest InstanceExists call for it said
// so. Load balancers leave such nodes out of their backends while the node
// lifecycle controller's guard keeps the Node (a machine that is gone cannot
// serve traffic, and clouds reject it as a target). Any doubt is "not known".
func (p *Provider) KnownGone(node *v1.Node) bool {
	if node.Spec.ProviderID == "" {
		return false
	}
	if p.cache != nil {
		return p.cache.knownGone(node)
	}
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	return p.obs.gone[node.Spec.ProviderID]
}

// ListedProviderID returns the provider ID the cached instance listing gives
// node's instance, without a cloud call: for a node that is not initialized
// yet, its instance matched by name, host names or system UUID
// (instance-cache.md). It is "" when the provider cannot list, nothing is
// cached, the listing lacks the node, or its metadata is not complete yet
// (Instance.MetadataErr). A node that has a provider ID gets it back.
func (p *Provider) ListedProviderID(node *v1.Node) string {
	if node.Spec.ProviderID != "" {
		return node.Spec.ProviderID
	}
	if inst := p.listed(node); inst != nil {
		return inst.Metadata.ProviderID
	}
	return ""
}

// ListedAddresses returns the addresses the cached instance listing reports
// for the instance of a node that is not initialized yet, as its
// initialization will set them from the cloud: nil where ListedProviderID
// gives no listed ID, and for a node that has a provider ID (its own
// addresses are then the cloud's).
func (p *Provider) ListedAddresses(node *v1.Node) []v1.NodeAddress {
	if node.Spec.ProviderID != "" {
		return nil
	}
	if inst := p.listed(node); inst != nil {
		return inst.Metadata.NodeAddresses
	}
	return nil
}

// listed is node's instance in the cached listing, when the listing knows it
// with complete metadata.
func (p *Provider) listed(node *v1.Node) *stratus.Instance {
	if p.cache == nil {
		return nil
	}
	p.cache.mu.Lock()
	snap := p.cache.snap
	p.cache.mu.Unlock()
	if snap == nil {
		return nil
	}
	if inst := snap.Find(node); inst != nil && inst.MetadataErr == nil {
		return inst
	}
	return nil
}

// fingerprintInstances is what a listing says about existence and power state,
// to tell whether a new listing changed anything a controller acts on.
func fingerprintInstances(list []stratus.Instance) string {
	keys := make([]string, 0, len(list))
	for i := range list {
		k := list[i].Metadata.ProviderID
		if k == "" {
			k = "name:" + list[i].Name
		}
		if list[i].Shutdown {
			k += "\x00down"
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, "\n")
}

// watchBackoff bounds the restarts of a provider's instance watch.
var watchBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 8, Cap: 2 * time.Minute}

// WatchInstances runs the provider's instance watch (pkg/stratus
// InstanceWatcher) until ctx ends, restarting it with a backoff when it fails.
// Every change it reports makes the instance cache list again (a watcher's
// listing costs no cloud call) and tells the subscribers. It returns at once for
// providers without a watch. The manager runs it on the leader.
func (p *Provider) WatchInstances(ctx context.Context) {
	lister, _ := p.instanceLister()
	w, ok := lister.(stratus.InstanceWatcher)
	if !ok || p.cache == nil {
		return
	}
	logger := log.FromContext(ctx).WithValues("provider", p.name)
	backoff := watchBackoff
	for ctx.Err() == nil {
		started := p.clock.Now()
		err := w.WatchInstances(ctx, func() { p.cache.invalidate(ctx) })
		if ctx.Err() != nil {
			return
		}
		if p.clock.Since(started) > watchBackoff.Cap {
			backoff = watchBackoff // it ran well for a while: start over
		}
		d := backoff.Step()
		logger.Error(err, "Instance watch stopped; restarting", "after", d)
		watchRestarts.WithLabelValues(p.name).Inc()
		if sleepCtx(ctx, p.clock, d) != nil {
			return
		}
	}
}

// ChangeSource is a controller-runtime source fed by the set's changes: for
// each change, requests returns what to reconcile, and those requests are added
// to the controller's queue at once (bypassing their backoff). Changes that
// arrive while requests runs are coalesced per provider and kind; requests runs
// on the source's own goroutine, so it may read the informer cache.
func ChangeSource(s *Set, requests func(context.Context, *Provider, Change) []reconcile.Request) source.Source {
	type key struct {
		p *Provider
		c Change
	}
	pending := make(chan key, 2*len(s.providers)+1)
	var mu sync.Mutex
	queued := map[key]bool{}
	s.Subscribe(func(p *Provider, c Change) {
		k := key{p, c}
		mu.Lock()
		defer mu.Unlock()
		if queued[k] {
			return
		}
		select {
		case pending <- k:
			queued[k] = true
		default: // cannot happen: every key has room
		}
	})
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case k := <-pending:
					mu.Lock()
					delete(queued, k)
					mu.Unlock()
					for _, r := range requests(ctx, k.p, k.c) {
						q.Add(r)
					}
				}
			}
		}()
		return nil
	})
}

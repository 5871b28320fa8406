package minicloud

import (
	"cmp"
	"errors"
	"net/netip"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/dataplane"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// resolver says where targets' traffic goes, within one transaction,
// decoding each instance once (a list of load balancers that share
// thousands of node targets would otherwise decode them again per LB).
type resolver struct {
	tx        *store.Tx
	instances map[string]*instanceAddr // nil: not found
	pools     map[string][]api.Target  // backend pool members by name; nil: not found
	peers     []PeerNetwork
}

// instanceAddr is the part of an instance that routing needs; decoding
// only these fields is much cheaper than a whole api.Instance.
type instanceAddr struct {
	State     string `json:"state"`
	PrivateIP string `json:"private_ip"`
}

func (s *Server) newResolver(tx *store.Tx) *resolver {
	return &resolver{tx: tx, instances: map[string]*instanceAddr{}, pools: map[string][]api.Target{}, peers: s.cfg.PeerNetworks}
}

// resolve returns the backend of t, or why it cannot receive traffic.
func (r *resolver) resolve(t api.Target) dataplane.Backend {
	if t.IP != "" {
		a, _ := netip.ParseAddr(t.IP)
		for _, p := range r.peers {
			if via, ok := p.Translate(a); ok {
				a = via
				break
			}
		}
		return dataplane.Backend{Addr: a}
	}
	inst, seen := r.instances[t.InstanceID]
	if !seen {
		if got, err := store.Get[instanceAddr](r.tx, store.Instances, t.InstanceID); err == nil {
			inst = &got
		}
		r.instances[t.InstanceID] = inst
	}
	if inst == nil {
		return dataplane.Backend{Down: "instance not found"}
	}
	a, _ := netip.ParseAddr(inst.PrivateIP)
	if inst.State != api.InstanceRunning {
		return dataplane.Backend{Addr: a, Down: "instance " + inst.State}
	}
	return dataplane.Backend{Addr: a}
}

// heldProvisioningRecheck is how often a load balancer whose activation the
// HoldProvisioning fault holds looks at the fault again.
const heldProvisioningRecheck = 500 * time.Millisecond

// scheduleActivation makes load balancer id active after d.
func (s *Server) scheduleActivation(id string, d time.Duration) {
	s.planeMu.Lock()
	defer s.planeMu.Unlock()
	if s.closed {
		return
	}
	if t := s.timers[id]; t != nil {
		t.Stop()
	}
	s.timers[id] = time.AfterFunc(max(d, 0), func() { s.activate(id) })
}

// activate ends the provisioning of load balancer id: it binds the
// listeners first and only then records "active", so a client that sees
// "active" can connect.
func (s *Server) activate(id string) {
	s.planeMu.Lock()
	defer s.planeMu.Unlock()
	if s.closed {
		return
	}
	if t := s.timers[id]; t != nil {
		t.Stop()
		delete(s.timers, id)
	}
	s.statsMu.Lock()
	held := s.faults.HoldProvisioning
	s.statsMu.Unlock()
	if held {
		// Looked at again until the fault is cleared.
		s.timers[id] = time.AfterFunc(heldProvisioningRecheck, func() { s.activate(id) })
		return
	}
	// As in reconcileLBs: without a data plane, resolving the targets is
	// work for nobody.
	plane := s.plane.Load()
	var spec dataplane.Spec
	provisioning := false
	err := s.store.View(func(tx *store.Tx) error {
		lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err != nil {
			return err
		}
		provisioning = lb.State == api.LBProvisioning
		if plane != nil {
			spec = planSpec(s.newResolver(tx), lb)
		}
		return nil
	})
	if err != nil || !provisioning {
		return
	}
	if plane != nil {
		if err := plane.Apply(id, spec); err != nil {
			s.log.Error(err, "data plane incomplete", "loadBalancer", id)
		}
		s.applyAliases(id, true, spec)
	}
	err = s.store.Update(func(tx *store.Tx) error {
		lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err != nil || lb.State != api.LBProvisioning {
			return err
		}
		lb.State = api.LBActive
		lb.UpdatedAt = time.Now().UTC()
		return store.Put(tx, store.LoadBalancers, id, lb)
	})
	if err != nil {
		// Deleted meanwhile (its reconcile waits for planeMu and will
		// remove it too) or the store failed: do not leave listeners.
		if plane != nil {
			plane.Remove(id)
			s.applyAliases(id, false, spec)
		}
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Error(err, "activate load balancer", "loadBalancer", id)
		}
	}
}

// reconcileLB makes the data plane of load balancer id match the store:
// listening when it is active, removed when it is not or is gone. It also
// drops the provisioning timer of a load balancer that no longer needs it.
func (s *Server) reconcileLB(id string) { s.reconcileLBs([]string{id}) }

// reconcileLBs reconciles several load balancers from one consistent read,
// resolving each target instance once.
func (s *Server) reconcileLBs(ids []string) {
	s.planeMu.Lock()
	defer s.planeMu.Unlock()
	if s.closed || len(ids) == 0 {
		return
	}
	// The plane is set under planeMu (Start), so it cannot appear meanwhile.
	// Without one only the states matter (activation timers): resolving
	// every target of a load balancer with thousands of them is most of an
	// update's cost.
	plane := s.plane.Load()
	specs := make([]dataplane.Spec, len(ids))
	states := make([]string, len(ids))
	err := s.store.View(func(tx *store.Tx) error {
		res := s.newResolver(tx)
		for i, id := range ids {
			lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			states[i] = lb.State
			if plane != nil {
				specs[i] = planSpec(res, lb)
			}
		}
		return nil
	})
	if err != nil {
		s.log.Error(err, "read load balancers for data plane", "loadBalancers", ids)
		return
	}
	for i, id := range ids {
		if t := s.timers[id]; t != nil && states[i] != api.LBProvisioning {
			t.Stop()
			delete(s.timers, id)
		}
		if plane == nil {
			continue
		}
		s.applyAliases(id, states[i] == api.LBActive, specs[i])
		if states[i] != api.LBActive {
			plane.Remove(id)
			continue
		}
		if err := plane.Apply(id, specs[i]); err != nil {
			s.log.Error(err, "data plane incomplete", "loadBalancer", id)
		}
	}
}

// parseRanges parses validated source ranges.
func parseRanges(ranges []string) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range ranges {
		if p, err := netip.ParsePrefix(r); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// planSpec translates a stored load balancer into the data plane's terms.
func planSpec(res *resolver, lb lbRecord) dataplane.Spec {
	vip, _ := netip.ParseAddr(lb.VIP)
	spec := dataplane.Spec{
		VIP:           vip,
		SourceIPHash:  lb.Algorithm == api.AlgorithmSourceIP,
		IdleTimeout:   time.Duration(lb.IdleTimeoutSeconds) * time.Second,
		ProxyProtocol: lb.ProxyProtocol,
	}
	index := map[api.Target]int{}
	for i, t := range res.served(&lb) {
		spec.Backends = append(spec.Backends, res.resolve(t))
		index[t] = i
	}
	for _, l := range lb.Listeners {
		dl := dataplane.Listener{Protocol: l.Protocol, Port: l.Port, TargetPort: l.TargetPort, SourceRanges: parseRanges(l.SourceRanges)}
		for _, t := range l.Targets {
			if i, ok := index[t]; ok {
				dl.Backends = append(dl.Backends, i)
			}
		}
		spec.Listeners = append(spec.Listeners, dl)
	}
	spec.SourceRanges = parseRanges(lb.SourceRanges)
	hc := lb.HealthCheck
	if hc == nil {
		// Default: TCP connect to the first TCP listener's target port; a
		// UDP-only load balancer without a health check probes nothing.
		for _, l := range lb.Listeners {
			if l.Protocol == api.ProtocolTCP {
				hc = &api.HealthCheck{Protocol: api.ProtocolTCP, Port: l.TargetPort}
				break
			}
		}
	}
	if hc != nil {
		interval := cmp.Or(time.Duration(hc.IntervalSeconds)*time.Second, defaultHealthInterval)
		spec.HealthCheck = dataplane.HealthCheck{
			Protocol: hc.Protocol, Port: hc.Port, Path: hc.Path, Interval: interval,
			Timeout:            cmp.Or(time.Duration(hc.TimeoutSeconds)*time.Second, min(interval, defaultHealthTimeout)),
			UnhealthyThreshold: hc.UnhealthyThreshold,
		}
		if spec.HealthCheck.Port == 0 && len(lb.Listeners) > 0 {
			spec.HealthCheck.Port = lb.Listeners[0].TargetPort
		}
	}
	return spec
}

// reconcileLBsTargeting re-applies the load balancers that serve
// instance id (directly or through a backend pool), after the instance stopped, started or was deleted.
func (s *Server) reconcileLBsTargeting(instanceID string) {
	s.reconcileLBs(s.targets.lbsOf(instanceID))
}

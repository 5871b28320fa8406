package minicloud

import (
	"cmp"
	"errors"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/dataplane"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// lbRecord is a load balancer as stored: api.LoadBalancer without
// TargetHealth, which is observed, not stored.
type lbRecord = api.LoadBalancer

// Health check defaults and limits (seconds, probes).
const (
	defaultHealthInterval = 5 * time.Second
	defaultHealthTimeout  = 2 * time.Second
	maxHealthInterval     = 300
	maxHealthTimeout      = 60
	maxUnhealthyThreshold = 10
	maxIdleTimeout        = 3600
)

// validateLBSpec checks spec and normalizes it (source ranges masked).
func validateLBSpec(spec *api.LoadBalancerSpec, create bool) error {
	if create {
		if err := validateName("load balancer", spec.Name); err != nil {
			return err
		}
	}
	if err := validateTags(spec.Tags); err != nil {
		return err
	}
	if len(spec.Listeners) == 0 {
		return errInvalid("a load balancer needs at least one listener")
	}
	seen := map[api.Listener]bool{}
	for _, l := range spec.Listeners {
		if l.Protocol != api.ProtocolTCP && l.Protocol != api.ProtocolUDP {
			return errInvalid("listener protocol %q: want TCP or UDP", l.Protocol)
		}
		if err := validatePort("listener port", l.Port); err != nil {
			return err
		}
		if err := validatePort("listener target_port", l.TargetPort); err != nil {
			return err
		}
		k := api.Listener{Protocol: l.Protocol, Port: l.Port}
		if seen[k] {
			return errInvalid("duplicate listener %s/%d", l.Protocol, l.Port)
		}
		seen[k] = true
	}
	targets := map[api.Target]bool{}
	for _, t := range spec.Targets {
		switch {
		case (t.InstanceID == "") == (t.IP == ""):
			return errInvalid("a target needs exactly one of instance_id and ip")
		case t.IP != "":
			a, err := netip.ParseAddr(t.IP)
			if err != nil || a.Zone() != "" {
				return errInvalid("target ip %q is not an IP address", t.IP)
			}
		}
		if targets[t] {
			return errInvalid("duplicate target %+v", t)
		}
		targets[t] = true
	}
	if hc := spec.HealthCheck; hc != nil {
		if hc.Protocol != api.ProtocolTCP && hc.Protocol != api.ProtocolHTTP {
			return errInvalid("health_check protocol %q: want TCP or HTTP", hc.Protocol)
		}
		if hc.Port != 0 {
			if err := validatePort("health_check port", hc.Port); err != nil {
				return err
			}
		}
		if hc.Path != "" && (hc.Protocol != api.ProtocolHTTP || !strings.HasPrefix(hc.Path, "/") || strings.ContainsAny(hc.Path, " \t\r\n#")) {
			return errInvalid("health_check path %q: an HTTP path starting with '/'", hc.Path)
		}
		if hc.IntervalSeconds < 0 || hc.IntervalSeconds > maxHealthInterval {
			return errInvalid("health_check interval_seconds %d out of range 1-%d", hc.IntervalSeconds, maxHealthInterval)
		}
		if hc.TimeoutSeconds < 0 || hc.TimeoutSeconds > maxHealthTimeout {
			return errInvalid("health_check timeout_seconds %d out of range 1-%d", hc.TimeoutSeconds, maxHealthTimeout)
		}
		// A probe that may outlast the interval would overlap the next one.
		if interval := cmp.Or(time.Duration(hc.IntervalSeconds)*time.Second, defaultHealthInterval); time.Duration(hc.TimeoutSeconds)*time.Second > interval {
			return errInvalid("health_check timeout_seconds %d exceeds the interval (%v)", hc.TimeoutSeconds, interval)
		}
		if hc.UnhealthyThreshold < 0 || hc.UnhealthyThreshold > maxUnhealthyThreshold {
			return errInvalid("health_check unhealthy_threshold %d out of range 1-%d", hc.UnhealthyThreshold, maxUnhealthyThreshold)
		}
	}
	if spec.Algorithm != "" && spec.Algorithm != api.AlgorithmRoundRobin && spec.Algorithm != api.AlgorithmSourceIP {
		return errInvalid("algorithm %q: want %q or %q", spec.Algorithm, api.AlgorithmRoundRobin, api.AlgorithmSourceIP)
	}
	if spec.IdleTimeoutSeconds < 0 || spec.IdleTimeoutSeconds > maxIdleTimeout {
		return errInvalid("idle_timeout_seconds %d out of range 1-%d", spec.IdleTimeoutSeconds, maxIdleTimeout)
	}
	for i, r := range spec.SourceRanges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return errInvalid("source range %q: %v", r, err)
		}
		spec.SourceRanges[i] = p.Masked().String()
	}
	return nil
}

// checkTargets verifies that instance targets exist.
func checkTargets(tx *store.Tx, targets []api.Target) error {
	for _, t := range targets {
		if t.InstanceID == "" {
			continue
		}
		if !tx.Exists(store.Instances, t.InstanceID) {
			return errInvalid("target instance %q does not exist", t.InstanceID)
		}
	}
	return nil
}

func (s *Server) createLB(r *http.Request) (int, any, error) {
	spec, body, err := decodeRequest(r, func(v *api.LoadBalancerSpec) error { return validateLBSpec(v, true) })
	if err != nil {
		return 0, nil, err
	}
	id, res, replayed, err := s.create(r, body, store.LoadBalancers, func(tx *store.Tx) (string, any, error) {
		if err := checkTargets(tx, spec.Targets); err != nil {
			return "", nil, err
		}
		id, err := tx.NextID(store.LoadBalancers, lbPrefix)
		if err != nil {
			return "", nil, err
		}
		if owner, ok, err := tx.ClaimName(store.LoadBalancers, spec.Name, id); err != nil {
			return "", nil, err
		} else if !ok {
			return "", nil, errConflict("load balancer name %q is used by %s", spec.Name, owner)
		}
		vip, err := tx.AllocateIP(poolVIP, s.cfg.VIPCIDR, id)
		if err != nil {
			return "", nil, storeErr(err, "load balancer", id)
		}
		now := time.Now().UTC()
		lb := lbRecord{ID: id, Name: spec.Name, VIP: vip.String(), State: api.LBProvisioning, CreatedAt: now, UpdatedAt: now}
		applySpec(&lb, spec)
		if err := store.Put(tx, store.LoadBalancers, id, lb); err != nil {
			return "", nil, err
		}
		s.addUnknownHealth(&lb)
		return id, lb, nil
	})
	if err != nil {
		return 0, nil, err
	}
	if replayed {
		return replay(id, res, s.loadBalancer)
	}
	s.targets.set(id, spec.Targets)
	if s.cfg.LBProvisionDelay == 0 {
		s.activate(id)
		lb, err := s.loadBalancer(id)
		if err == nil {
			res = lb
		}
	} else {
		s.scheduleActivation(id, s.cfg.LBProvisionDelay)
	}
	return http.StatusCreated, res, nil
}

func applySpec(lb *lbRecord, spec api.LoadBalancerSpec) {
	lb.Tags = spec.Tags
	lb.Listeners = spec.Listeners
	lb.Targets = spec.Targets
	if lb.Targets == nil {
		lb.Targets = []api.Target{}
	}
	lb.HealthCheck = spec.HealthCheck
	lb.SourceRanges = spec.SourceRanges
	lb.Algorithm = spec.Algorithm
	lb.IdleTimeoutSeconds = spec.IdleTimeoutSeconds
	lb.ProxyProtocol = spec.ProxyProtocol
}

func (s *Server) addUnknownHealth(lb *api.LoadBalancer) {
	lb.TargetHealth = make([]api.TargetHealth, len(lb.Targets))
	for i, t := range lb.Targets {
		lb.TargetHealth[i] = api.TargetHealth{Target: t, IP: t.IP, State: api.HealthUnknown, Reason: "load balancer " + lb.State}
	}
}

// withHealth fills in lb.TargetHealth from the instances and the data
// plane.
func (s *Server) withHealth(res *resolver, lb *api.LoadBalancer) {
	var observed map[netip.Addr]dataplane.Health
	// No planeMu here: this runs inside a read transaction, and
	// reconcileLB opens read transactions while holding planeMu.
	if plane := s.plane.Load(); lb.State == api.LBActive && plane != nil {
		observed = plane.Health(lb.ID)
	}
	lb.TargetHealth = make([]api.TargetHealth, len(lb.Targets))
	for i, t := range lb.Targets {
		be := res.resolve(t)
		th := api.TargetHealth{Target: t, State: api.HealthUnknown}
		if be.Addr.IsValid() {
			th.IP = be.Addr.String()
		}
		switch h, ok := observed[be.Addr]; {
		case lb.State != api.LBActive:
			th.Reason = "load balancer " + lb.State
		case be.Down != "":
			th.State, th.Reason = api.HealthUnhealthy, be.Down
		case ok:
			th.State, th.Reason = h.State, h.Reason
		}
		lb.TargetHealth[i] = th
	}
}

// resolver says where targets' traffic goes, within one transaction,
// decoding each instance once (a list of load balancers that share
// thousands of node targets would otherwise decode them again per LB).
type resolver struct {
	tx        *store.Tx
	instances map[string]*instanceAddr // nil: not found
	peers     []PeerNetwork
}

// instanceAddr is the part of an instance that routing needs; decoding
// only these fields is much cheaper than a whole api.Instance.
type instanceAddr struct {
	State     string `json:"state"`
	PrivateIP string `json:"private_ip"`
}

func (s *Server) newResolver(tx *store.Tx) *resolver {
	return &resolver{tx: tx, instances: map[string]*instanceAddr{}, peers: s.cfg.PeerNetworks}
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

func (s *Server) loadBalancer(id string) (any, error) {
	var lb api.LoadBalancer
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		lb, err = store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err == nil {
			s.withHealth(s.newResolver(tx), &lb)
		}
		return err
	})
	return lb, storeErr(err, "load balancer", id)
}

func (s *Server) getLB(r *http.Request) (int, any, error) {
	id, err := pathID(r, lbPrefix, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	lb, err := s.loadBalancer(id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, lb, nil
}

func (s *Server) listLBs(r *http.Request) (int, any, error) {
	values := r.URL.Query()
	// view=summary leaves out targets and their health: a listing of
	// hundreds of load balancers with thousands of targets each is
	// otherwise hundreds of megabytes, when the caller wants states.
	summary := false
	if vs, ok := values["view"]; ok {
		if len(vs) != 1 || (vs[0] != api.ViewFull && vs[0] != api.ViewSummary) {
			return 0, nil, errInvalid("view must be %q or %q", api.ViewFull, api.ViewSummary)
		}
		summary = vs[0] == api.ViewSummary
		delete(values, "view")
	}
	q, err := parseListQuery(values, lbPrefix, true)
	if err != nil {
		return 0, nil, err
	}
	var items []api.LoadBalancer
	var more bool
	err = s.store.View(func(tx *store.Tx) error {
		var err error
		items, more, err = query(tx, store.LoadBalancers, q, func(lb *lbRecord) map[string]string { return lb.Tags })
		if err != nil {
			return err
		}
		if summary {
			for i := range items {
				items[i].Targets = nil
			}
			return nil
		}
		res := s.newResolver(tx)
		for i := range items {
			s.withHealth(res, &items[i])
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(items, more, func(lb api.LoadBalancer) string { return lb.ID }), nil
}

func (s *Server) updateLB(r *http.Request) (int, any, error) {
	id, err := pathID(r, lbPrefix, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	spec, _, err := decodeRequest(r, func(v *api.LoadBalancerSpec) error { return validateLBSpec(v, false) })
	if err != nil {
		return 0, nil, err
	}
	err = s.store.Update(func(tx *store.Tx) error {
		lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err != nil {
			return err
		}
		if spec.Name != "" && spec.Name != lb.Name {
			return errInvalid("a load balancer cannot be renamed (%q to %q)", lb.Name, spec.Name)
		}
		if err := checkTargets(tx, spec.Targets); err != nil {
			return err
		}
		applySpec(&lb, spec)
		lb.UpdatedAt = time.Now().UTC()
		return store.Put(tx, store.LoadBalancers, id, lb)
	})
	if err != nil {
		return 0, nil, storeErr(err, "load balancer", id)
	}
	s.targets.set(id, spec.Targets)
	s.reconcileLB(id)
	lb, err := s.loadBalancer(id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, lb, nil
}

func (s *Server) deleteLB(r *http.Request) (int, any, error) {
	id, err := pathID(r, lbPrefix, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	err = s.store.Update(func(tx *store.Tx) error {
		lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err != nil {
			return err
		}
		if err := tx.Delete(store.LoadBalancers, id); err != nil {
			return err
		}
		if err := tx.ReleaseName(store.LoadBalancers, lb.Name); err != nil {
			return err
		}
		return tx.ReleaseIP(poolVIP, lb.VIP)
	})
	if err != nil {
		return 0, nil, storeErr(err, "load balancer", id)
	}
	s.targets.drop(id)
	s.reconcileLB(id)
	return http.StatusNoContent, nil, nil
}

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
	var spec dataplane.Spec
	provisioning := false
	err := s.store.View(func(tx *store.Tx) error {
		lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err != nil {
			return err
		}
		provisioning = lb.State == api.LBProvisioning
		spec = planSpec(s.newResolver(tx), lb)
		return nil
	})
	if err != nil || !provisioning {
		return
	}
	plane := s.plane.Load()
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
			specs[i] = planSpec(res, lb)
		}
		return nil
	})
	if err != nil {
		s.log.Error(err, "read load balancers for data plane", "loadBalancers", ids)
		return
	}
	plane := s.plane.Load()
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

// planSpec translates a stored load balancer into the data plane's terms.
func planSpec(res *resolver, lb lbRecord) dataplane.Spec {
	vip, _ := netip.ParseAddr(lb.VIP)
	spec := dataplane.Spec{
		VIP:           vip,
		SourceIPHash:  lb.Algorithm == api.AlgorithmSourceIP,
		IdleTimeout:   time.Duration(lb.IdleTimeoutSeconds) * time.Second,
		ProxyProtocol: lb.ProxyProtocol,
	}
	for _, l := range lb.Listeners {
		spec.Listeners = append(spec.Listeners, dataplane.Listener{Protocol: l.Protocol, Port: l.Port, TargetPort: l.TargetPort})
	}
	for _, t := range lb.Targets {
		spec.Backends = append(spec.Backends, res.resolve(t))
	}
	for _, r := range lb.SourceRanges {
		if p, err := netip.ParsePrefix(r); err == nil {
			spec.SourceRanges = append(spec.SourceRanges, p)
		}
	}
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

// reconcileLBsTargeting re-applies the load balancers that target
// instance id, after the instance stopped, started or was deleted.
func (s *Server) reconcileLBsTargeting(instanceID string) {
	s.reconcileLBs(s.targets.lbsOf(instanceID))
}

// targetIndex maps instances to the load balancers that target them, so an
// instance change re-applies those without scanning every load balancer.
// It is updated after each committed change and before the reconcile that
// follows it, so a concurrent instance change is never missed: either it
// sees the new entry, or the load balancer's own reconcile (which comes
// later) reads the instance's new state.
type targetIndex struct {
	mu         sync.Mutex
	byInstance map[string]map[string]bool
	byLB       map[string][]string
}

func (x *targetIndex) set(lbID string, targets []api.Target) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byInstance == nil {
		x.byInstance, x.byLB = map[string]map[string]bool{}, map[string][]string{}
	}
	x.dropLocked(lbID)
	var ids []string
	for _, t := range targets {
		if t.InstanceID == "" {
			continue
		}
		if x.byInstance[t.InstanceID] == nil {
			x.byInstance[t.InstanceID] = map[string]bool{}
		}
		x.byInstance[t.InstanceID][lbID] = true
		ids = append(ids, t.InstanceID)
	}
	if len(ids) > 0 {
		x.byLB[lbID] = ids
	}
}

func (x *targetIndex) drop(lbID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropLocked(lbID)
}

func (x *targetIndex) dropLocked(lbID string) {
	for _, inst := range x.byLB[lbID] {
		delete(x.byInstance[inst], lbID)
		if len(x.byInstance[inst]) == 0 {
			delete(x.byInstance, inst)
		}
	}
	delete(x.byLB, lbID)
}

func (x *targetIndex) lbsOf(instanceID string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := make([]string, 0, len(x.byInstance[instanceID]))
	for id := range x.byInstance[instanceID] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

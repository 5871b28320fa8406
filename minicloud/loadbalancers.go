package minicloud

import (
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/dataplane"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// lbRecord is a load balancer as stored: api.LoadBalancer without
// TargetHealth, which is observed, not stored.
type lbRecord = api.LoadBalancer

func (s *Server) createLB(r *http.Request) (int, any, error) {
	// view=summary: the answer without targets and their health, as GET's.
	summary, err := viewOfRequest(r)
	if err != nil {
		return 0, nil, err
	}
	view := func(id string) (any, error) { return s.loadBalancerView(id, summary) }
	spec, body, err := decodeRequest(r, func(v *api.LoadBalancerSpec) error { return validateLBSpec(v, true) })
	if err != nil {
		return 0, nil, err
	}
	id, res, replayed, err := s.create(r, body, store.LoadBalancers, func(tx *store.Tx) (string, any, error) {
		if err := checkRefs(tx, spec); err != nil {
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
		res := s.newResolver(tx)
		s.indexLB(res, &lb)
		addUnknownHealth(res, &lb)
		return id, lb, nil
	})
	if err != nil {
		return 0, nil, err
	}
	if replayed {
		return replay(id, res, view)
	}
	if s.cfg.LBProvisionDelay == 0 {
		s.activate(id)
	} else {
		s.scheduleActivation(id, s.cfg.LBProvisionDelay)
	}
	if lb, err := view(id); err == nil {
		res = lb
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
	lb.BackendPools = spec.BackendPools
}

func addUnknownHealth(res *resolver, lb *api.LoadBalancer) {
	served := res.served(lb)
	lb.TargetHealth = make([]api.TargetHealth, len(served))
	for i, t := range served {
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
	served := res.served(lb)
	lb.TargetHealth = make([]api.TargetHealth, len(served))
	for i, t := range served {
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

// loadBalancerView is load balancer id as GET answers it: with its targets
// and their health, or in the summary view without them.
func (s *Server) loadBalancerView(id string, summary bool) (any, error) {
	var lb api.LoadBalancer
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		lb, err = store.Get[lbRecord](tx, store.LoadBalancers, id)
		if err != nil {
			return err
		}
		lb.TargetsDigest = api.TargetsDigest(lb.Targets, lb.Listeners, lb.BackendPools)
		if summary {
			summarize(&lb)
			return nil
		}
		s.withHealth(s.newResolver(tx), &lb)
		return nil
	})
	return lb, storeErr(err, "load balancer", id)
}

// summarize leaves out of lb what the summary view does not carry: its
// targets (the listeners' too), backend pools and target health.
func summarize(lb *api.LoadBalancer) {
	lb.Targets, lb.BackendPools, lb.TargetHealth = nil, nil, nil
	for j := range lb.Listeners {
		lb.Listeners[j].Targets = nil
	}
}

// viewOf reads a request's view parameter (full, the default, or summary)
// and removes it from values.
func viewOf(values url.Values) (summary bool, err error) {
	vs, ok := values["view"]
	if !ok {
		return false, nil
	}
	if len(vs) != 1 || (vs[0] != api.ViewFull && vs[0] != api.ViewSummary) {
		return false, errInvalid("view must be %q or %q", api.ViewFull, api.ViewSummary)
	}
	delete(values, "view")
	return vs[0] == api.ViewSummary, nil
}

// viewOfRequest is viewOf of r's query.
func viewOfRequest(r *http.Request) (bool, error) { return viewOf(r.URL.Query()) }

func (s *Server) getLB(r *http.Request) (int, any, error) {
	id, err := pathID(r, lbPrefix, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	summary, err := viewOfRequest(r)
	if err != nil {
		return 0, nil, err
	}
	lb, err := s.loadBalancerView(id, summary)
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
	summary, err := viewOf(values)
	if err != nil {
		return 0, nil, err
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
		for i := range items {
			items[i].TargetsDigest = api.TargetsDigest(items[i].Targets, items[i].Listeners, items[i].BackendPools)
		}
		if summary {
			for i := range items {
				summarize(&items[i])
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
	summary, err := viewOfRequest(r)
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
		if err := checkRefs(tx, spec); err != nil {
			return err
		}
		applySpec(&lb, spec)
		lb.UpdatedAt = time.Now().UTC()
		if err := store.Put(tx, store.LoadBalancers, id, lb); err != nil {
			return err
		}
		s.indexLB(s.newResolver(tx), &lb)
		return nil
	})
	if err != nil {
		return 0, nil, storeErr(err, "load balancer", id)
	}
	s.reconcileLB(id)
	lb, err := s.loadBalancerView(id, summary)
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
	// The data plane stops before the deletion commits, under planeMu (the
	// lock order is planeMu, then a store transaction): a client that no
	// longer finds the load balancer in a listing finds its VIP closed too.
	s.planeMu.Lock()
	if plane := s.plane.Load(); plane != nil && !s.closed {
		plane.Remove(id)
		s.applyAliases(id, false, dataplane.Spec{})
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
	s.planeMu.Unlock()
	if err != nil {
		// Not deleted: it listens again as the store says.
		s.reconcileLB(id)
		return 0, nil, storeErr(err, "load balancer", id)
	}
	s.targets.drop(id)
	s.pools.drop(id)
	s.reconcileLB(id)
	return http.StatusNoContent, nil, nil
}

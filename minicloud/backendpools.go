package minicloud

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Backend pools are named sets of targets that load balancers share by
// naming them (api.LoadBalancerSpec.BackendPools), as GCE's instance groups
// and Azure's backend address pools: one update of a pool's members reaches
// every load balancer that names it. A load balancer serves its own targets
// and its pools' members; the data plane resolves the members whenever it
// applies the load balancer, and health checks probe them per load balancer.

// poolRecord is a backend pool as stored.
type poolRecord = api.BackendPool

// poolPrefix is the ID prefix of backend pools.
const poolPrefix = "bp-"

// validatePoolSpec checks a backend pool's spec.
func validatePoolSpec(spec *api.BackendPoolSpec, create bool) error {
	if create {
		if err := validateName("backend pool", spec.Name); err != nil {
			return err
		}
	}
	if err := validateTags(spec.Tags); err != nil {
		return err
	}
	return validateTargets(spec.Targets)
}

// validatePoolNames checks the backend pools a load balancer names: at most
// api.MaxBackendPoolsPerLB, each once.
func validatePoolNames(names []string) error {
	if len(names) > api.MaxBackendPoolsPerLB {
		return errInvalid("%d backend pools: a load balancer names at most %d", len(names), api.MaxBackendPoolsPerLB)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" {
			return errInvalid("backend pool name must not be empty")
		}
		if seen[n] {
			return errInvalid("duplicate backend pool %q", n)
		}
		seen[n] = true
	}
	return nil
}

// checkPools verifies that the named backend pools exist.
func checkPools(tx *store.Tx, names []string) error {
	for _, n := range names {
		if _, err := tx.LookupName(store.BackendPools, n); errors.Is(err, store.ErrNotFound) {
			return errInvalid("backend pool %q does not exist", n)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// poolMembers returns the members of the backend pool name (nil when it
// does not exist), decoding each pool once per resolver.
func (r *resolver) poolMembers(name string) []api.Target {
	if members, seen := r.pools[name]; seen {
		return members
	}
	var members []api.Target
	if id, err := r.tx.LookupName(store.BackendPools, name); err == nil {
		if p, err := store.Get[poolRecord](r.tx, store.BackendPools, id); err == nil {
			members = p.Targets
		}
	}
	r.pools[name] = members
	return members
}

// served returns every target lb serves: its own, then the members of its
// backend pools that are not among them, in pool order.
func (r *resolver) served(lb *lbRecord) []api.Target {
	if len(lb.BackendPools) == 0 {
		return lb.Targets
	}
	seen := make(map[api.Target]bool, len(lb.Targets))
	out := slices.Clone(lb.Targets)
	for _, t := range lb.Targets {
		seen[t] = true
	}
	for _, name := range lb.BackendPools {
		for _, t := range r.poolMembers(name) {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// indexLB records what load balancer lb refers to: the instances it serves
// (directly or through its pools) and the pools it names.
func (s *Server) indexLB(res *resolver, lb *lbRecord) {
	s.targets.set(lb.ID, instanceIDs(res.served(lb)))
	s.pools.set(lb.ID, lb.BackendPools)
}

func (s *Server) createPool(r *http.Request) (int, any, error) {
	spec, body, err := decodeRequest(r, func(v *api.BackendPoolSpec) error { return validatePoolSpec(v, true) })
	if err != nil {
		return 0, nil, err
	}
	id, res, replayed, err := s.create(r, body, store.BackendPools, func(tx *store.Tx) (string, any, error) {
		if err := checkTargets(tx, spec.Targets); err != nil {
			return "", nil, err
		}
		id, err := tx.NextID(store.BackendPools, poolPrefix)
		if err != nil {
			return "", nil, err
		}
		if owner, ok, err := tx.ClaimName(store.BackendPools, spec.Name, id); err != nil {
			return "", nil, err
		} else if !ok {
			return "", nil, errConflict("backend pool name %q is used by %s", spec.Name, owner)
		}
		now := time.Now().UTC()
		p := poolRecord{ID: id, Name: spec.Name, Tags: spec.Tags, Targets: nonNil(spec.Targets), CreatedAt: now, UpdatedAt: now}
		return id, p, store.Put(tx, store.BackendPools, id, p)
	})
	if err != nil {
		return 0, nil, err
	}
	if replayed {
		return replay(id, res, s.backendPool)
	}
	// Nobody names a new pool yet (a load balancer naming it was refused),
	// unless a load balancer named a pool of this name that was deleted
	// and is created again: those serve its members now.
	s.reapplyPoolUsers(spec.Name)
	return http.StatusCreated, res, nil
}

func nonNil(targets []api.Target) []api.Target {
	if targets == nil {
		return []api.Target{}
	}
	return targets
}

func (s *Server) backendPool(id string) (any, error) {
	var p poolRecord
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		p, err = store.Get[poolRecord](tx, store.BackendPools, id)
		return err
	})
	return p, storeErr(err, "backend pool", id)
}

func (s *Server) getPool(r *http.Request) (int, any, error) {
	id, err := pathID(r, poolPrefix, "backend pool")
	if err != nil {
		return 0, nil, err
	}
	p, err := s.backendPool(id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, p, nil
}

func (s *Server) listPools(r *http.Request) (int, any, error) {
	q, err := parseListQuery(r.URL.Query(), poolPrefix, true)
	if err != nil {
		return 0, nil, err
	}
	var items []poolRecord
	var more bool
	err = s.store.View(func(tx *store.Tx) error {
		var err error
		items, more, err = query(tx, store.BackendPools, q, func(p *poolRecord) map[string]string { return p.Tags })
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(items, more, func(p poolRecord) string { return p.ID }), nil
}

// updatePool replaces a pool's tags and members; every load balancer that
// names it serves the new members once the answer is sent.
func (s *Server) updatePool(r *http.Request) (int, any, error) {
	id, err := pathID(r, poolPrefix, "backend pool")
	if err != nil {
		return 0, nil, err
	}
	spec, _, err := decodeRequest(r, func(v *api.BackendPoolSpec) error { return validatePoolSpec(v, false) })
	if err != nil {
		return 0, nil, err
	}
	var p poolRecord
	err = s.store.Update(func(tx *store.Tx) error {
		var err error
		if p, err = store.Get[poolRecord](tx, store.BackendPools, id); err != nil {
			return err
		}
		if spec.Name != "" && spec.Name != p.Name {
			return errInvalid("a backend pool cannot be renamed (%q to %q)", p.Name, spec.Name)
		}
		if err := checkTargets(tx, spec.Targets); err != nil {
			return err
		}
		p.Tags, p.Targets, p.UpdatedAt = spec.Tags, nonNil(spec.Targets), time.Now().UTC()
		return store.Put(tx, store.BackendPools, id, p)
	})
	if err != nil {
		return 0, nil, storeErr(err, "backend pool", id)
	}
	s.reapplyPoolUsers(p.Name)
	return http.StatusOK, p, nil
}

// reapplyPoolUsers re-indexes and re-applies the load balancers that name
// the backend pool name, after its members changed.
func (s *Server) reapplyPoolUsers(name string) {
	ids := s.pools.lbsOf(name)
	if len(ids) == 0 {
		return
	}
	err := s.store.View(func(tx *store.Tx) error {
		res := s.newResolver(tx)
		for _, id := range ids {
			lb, err := store.Get[lbRecord](tx, store.LoadBalancers, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			s.indexLB(res, &lb)
		}
		return nil
	})
	if err != nil {
		s.log.Error(err, "index load balancers of backend pool", "backendPool", name)
	}
	s.reconcileLBs(ids)
}

// deletePool deletes a backend pool no load balancer names; one that is
// named is refused with 409 naming those load balancers.
func (s *Server) deletePool(r *http.Request) (int, any, error) {
	id, err := pathID(r, poolPrefix, "backend pool")
	if err != nil {
		return 0, nil, err
	}
	err = s.store.Update(func(tx *store.Tx) error {
		p, err := store.Get[poolRecord](tx, store.BackendPools, id)
		if err != nil {
			return err
		}
		// Read in this transaction, not from the index: a load balancer
		// naming the pool may have committed a moment ago.
		users, _, err := store.List(tx, store.LoadBalancers, "", 0, func(lb *lbRecord) bool {
			return slices.Contains(lb.BackendPools, p.Name)
		})
		if err != nil {
			return err
		}
		if len(users) > 0 {
			ids := make([]string, len(users))
			for i, lb := range users {
				ids[i] = lb.ID
			}
			return errConflict("backend pool %q (%s) is in use by load balancer(s) %s", p.Name, id, strings.Join(ids, ", "))
		}
		if err := tx.Delete(store.BackendPools, id); err != nil {
			return err
		}
		return tx.ReleaseName(store.BackendPools, p.Name)
	})
	if err != nil {
		return 0, nil, storeErr(err, "backend pool", id)
	}
	return http.StatusNoContent, nil, nil
}

package minicloud

import (
	"sort"
	"sync"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

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

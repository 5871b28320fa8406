package minicloud

import (
	"sort"
	"sync"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// refIndex maps what load balancers refer to (instances they target, the
// backend pools they name) to those load balancers, so an instance or pool
// change re-applies them without scanning every load balancer. It is
// updated after each committed change and before the reconcile that follows
// it, so a concurrent instance change is never missed: either it sees the
// new entry, or the load balancer's own reconcile (which comes later) reads
// the instance's new state.
type refIndex struct {
	mu    sync.Mutex
	byRef map[string]map[string]bool
	byLB  map[string][]string
}

// set records refs as everything load balancer lbID refers to.
func (x *refIndex) set(lbID string, refs []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byRef == nil {
		x.byRef, x.byLB = map[string]map[string]bool{}, map[string][]string{}
	}
	x.dropLocked(lbID)
	for _, ref := range refs {
		if x.byRef[ref] == nil {
			x.byRef[ref] = map[string]bool{}
		}
		x.byRef[ref][lbID] = true
	}
	if len(refs) > 0 {
		x.byLB[lbID] = refs
	}
}

// instanceIDs are the instances among targets.
func instanceIDs(targets []api.Target) []string {
	var ids []string
	for _, t := range targets {
		if t.InstanceID != "" {
			ids = append(ids, t.InstanceID)
		}
	}
	return ids
}

func (x *refIndex) drop(lbID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropLocked(lbID)
}

func (x *refIndex) dropLocked(lbID string) {
	for _, ref := range x.byLB[lbID] {
		delete(x.byRef[ref], lbID)
		if len(x.byRef[ref]) == 0 {
			delete(x.byRef, ref)
		}
	}
	delete(x.byLB, lbID)
}

// lbsOf returns the load balancers that refer to ref, sorted.
func (x *refIndex) lbsOf(ref string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := make([]string, 0, len(x.byRef[ref]))
	for id := range x.byRef[ref] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

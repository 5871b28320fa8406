package service

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// keyLocks serializes the cloud writes for one Service: a service sync
// (Ensure, Delete) and a backend update (UpdateLoadBalancer) never run at the
// same time for the same Service, so a slow backend update cannot write a
// stale view of the Service after a newer Ensure (a provider's update is
// often a read-modify-write of the whole load balancer).
type keyLocks struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int // holders and waiters; the entry goes when it drops to 0
}

// lock locks key and returns its unlock.
func (l *keyLocks) lock(key types.NamespacedName) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[types.NamespacedName]*keyLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()

	k.Lock()
	return func() {
		k.Unlock()
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

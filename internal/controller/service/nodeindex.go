package service

// The node index: the informer's Node objects, shared and read-only, that
// Controller.backends reads.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// nodeIndex holds the informer's Node objects themselves, not copies, as
// its event handler receives them: with thousands of nodes, a copy of every
// Node per backend computation and busy worker was most of the controller's
// memory. Nobody may modify them.
type nodeIndex struct {
	mu    sync.RWMutex
	nodes map[string]*v1.Node
	reg   toolscache.ResourceEventHandlerRegistration
}

// newNodeIndex registers an index with the manager cache's Node informer.
func newNodeIndex(ctx context.Context, informers cache.Informers) (*nodeIndex, error) {
	// Not blocking: list reports "not synced" until the index is.
	inf, err := informers.GetInformer(ctx, &v1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	x := &nodeIndex{nodes: map[string]*v1.Node{}}
	x.reg, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.put,
		UpdateFunc: func(_, obj any) { x.put(obj) },
		DeleteFunc: x.remove,
	})
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	return x, nil
}

func (x *nodeIndex) put(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		x.mu.Lock()
		x.nodes[n.Name] = n
		x.mu.Unlock()
	}
}

func (x *nodeIndex) remove(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*v1.Node); ok {
		x.mu.Lock()
		delete(x.nodes, n.Name)
		x.mu.Unlock()
	}
}

// list returns every Node, once the index has received the informer's
// initial list.
func (x *nodeIndex) list() ([]*v1.Node, error) {
	if !x.reg.HasSynced() {
		return nil, errors.New("list nodes: the node cache is not synced yet")
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*v1.Node, 0, len(x.nodes))
	for _, n := range x.nodes {
		out = append(out, n)
	}
	return out, nil
}

// Package instanceindex matches Nodes to the instances of one provider listing
// (pkg/cloudprovider.InstanceLister), so that a controller pass over all nodes
// costs one listing instead of one cloud call per node.
package instanceindex

import (
	v1 "k8s.io/api/core/v1"

	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
)

// Index is one listing, by provider ID and by instance name.
type Index struct {
	byID   map[string]*pcp.Instance
	byName map[string]*pcp.Instance
	size   int
}

// New indexes list. Instances without provider ID are found only by name.
func New(list []pcp.Instance) *Index {
	idx := &Index{
		byID:   make(map[string]*pcp.Instance, len(list)),
		byName: make(map[string]*pcp.Instance, len(list)),
		size:   len(list),
	}
	for i := range list {
		inst := &list[i]
		if inst.Metadata.ProviderID != "" {
			idx.byID[inst.Metadata.ProviderID] = inst
		}
		if inst.Name != "" {
			idx.byName[inst.Name] = inst
		}
	}
	return idx
}

// Find returns the node's instance: the one with the node's provider ID, or, for a
// node without one, the one named like the node. It returns nil when the listing
// has no such instance.
func (idx *Index) Find(node *v1.Node) *pcp.Instance {
	if node.Spec.ProviderID != "" {
		return idx.byID[node.Spec.ProviderID]
	}
	return idx.byName[node.Name]
}

// Len is the number of instances in the listing.
func (idx *Index) Len() int { return idx.size }

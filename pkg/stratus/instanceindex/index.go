// Package instanceindex matches Nodes to the instances of one provider listing
// (pkg/stratus.InstanceLister), so that a controller pass over all nodes
// costs one listing instead of one cloud call per node.
package instanceindex

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Index is one listing, by provider ID, by instance name, by the other host
// names instances list and by system UUID.
type Index struct {
	byID       map[string]*stratus.Instance
	byLowerID  map[string]*stratus.Instance
	byName     map[string]*stratus.Instance
	byHostname map[string]*stratus.Instance
	byUUID     map[string]*stratus.Instance
	size       int
}

// New indexes list. Instances without provider ID are found only by name,
// host name or system UUID. When two instances claim the same name, the
// first one listed keeps it.
func New(list []stratus.Instance) *Index {
	idx := &Index{
		byID:      make(map[string]*stratus.Instance, len(list)),
		byLowerID: make(map[string]*stratus.Instance, len(list)),
		byName:    make(map[string]*stratus.Instance, len(list)),
		size:      len(list),
	}
	for i := range list {
		inst := &list[i]
		if id := inst.Metadata.ProviderID; id != "" {
			idx.byID[id] = inst
			if _, taken := idx.byLowerID[strings.ToLower(id)]; !taken {
				idx.byLowerID[strings.ToLower(id)] = inst
			}
		}
		if inst.Name != "" {
			idx.byName[inst.Name] = inst
		}
		for _, h := range inst.Hostnames {
			if h == "" {
				continue
			}
			if idx.byHostname == nil {
				idx.byHostname = map[string]*stratus.Instance{}
			}
			if _, taken := idx.byHostname[h]; !taken {
				idx.byHostname[h] = inst
			}
		}
		for _, u := range inst.SystemUUIDs {
			if u == "" {
				continue
			}
			if idx.byUUID == nil {
				idx.byUUID = map[string]*stratus.Instance{}
			}
			u = strings.ToLower(u)
			if _, taken := idx.byUUID[u]; !taken {
				idx.byUUID[u] = inst
			}
		}
	}
	return idx
}

// Find returns the node's instance: the one with the node's provider ID (compared
// exactly, else case-insensitively), or, for a
// node without one, the one named like the node, else the one listing the node's
// name among its host names, else the one with the node's system UUID. It returns
// nil when the listing has no such instance.
func (idx *Index) Find(node *v1.Node) *stratus.Instance {
	if id := node.Spec.ProviderID; id != "" {
		if inst := idx.byID[id]; inst != nil {
			return inst
		}
		// A provider ID that differs only in case names the same machine
		// (vSphere's UUIDs are written in either case): a miss here would
		// make the machine look gone.
		return idx.byLowerID[strings.ToLower(id)]
	}
	if inst := idx.byName[node.Name]; inst != nil {
		return inst
	}
	if inst := idx.byHostname[node.Name]; inst != nil {
		return inst
	}
	if u := node.Status.NodeInfo.SystemUUID; u != "" {
		return idx.byUUID[strings.ToLower(u)]
	}
	return nil
}

// Len is the number of instances in the listing.
func (idx *Index) Len() int { return idx.size }

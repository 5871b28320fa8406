package vsphere

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Zone refresh settings. Tags have no change feed, so they are read again
// slowly, and at once (but not more often than zoneMissRefresh) when a VM
// runs on a host the provider has not seen yet.
var (
	zoneRefresh     = 5 * time.Minute
	zoneMissRefresh = 30 * time.Second
	tagInfoTTL      = time.Hour
)

// zoneData is the zone and region of a host.
type zoneData struct{ zone, region string }

// zoneCache is one vCenter's zones and regions by host: each from the tag
// of its category on the nearest of the host's ancestors (the host, its
// cluster or compute resource, the folders above, the datacenter), as
// upstream. A refresh reads the ancestry of all hosts in one property
// retrieve and the tags of all of them in one batched vAPI call
// (list-attached-tags-on-objects); tag and category names are cached.
type zoneCache struct {
	c      *conn
	labels Labels

	mu       sync.Mutex
	byHost   map[types.ManagedObjectReference]zoneData
	loadedAt time.Time // of the last successful refresh
	triedAt  time.Time // of the last refresh
	err      error     // of the last refresh
	tags     map[string]tagInfo
	cats     map[string]catInfo
	version  uint64
}

type tagInfo struct {
	name, categoryID string
	at               time.Time
}

type catInfo struct {
	name string
	at   time.Time
}

func newZoneCache(c *conn, labels Labels) *zoneCache {
	return &zoneCache{c: c, labels: labels, tags: map[string]tagInfo{}, cats: map[string]catInfo{}}
}

// zonesOf returns the zone data of hosts, refreshing when the data is old
// or a host is missing. When a refresh fails, known hosts keep their last
// data and err says why the others have none.
func (z *zoneCache) zonesOf(ctx context.Context, hosts []types.ManagedObjectReference) (map[types.ManagedObjectReference]zoneData, error) {
	if !z.labels.Enabled() {
		return nil, nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	missing := func() bool {
		for _, h := range hosts {
			if _, ok := z.byHost[h]; !ok {
				return true
			}
		}
		return false
	}
	now := time.Now()
	if (z.byHost == nil || now.Sub(z.loadedAt) > zoneRefresh || missing()) && now.Sub(z.triedAt) >= zoneMissRefresh {
		z.err = z.refreshLocked(ctx)
	}
	if z.err != nil && (z.byHost == nil || missing()) {
		return z.byHost, z.err
	}
	// A host still unknown after a successful refresh appeared since; its
	// VMs have no zone until the next refresh.
	return z.byHost, nil
}

// refresh reads all hosts' zones now and reports whether any changed.
func (z *zoneCache) refresh(ctx context.Context) (bool, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	before := z.version
	z.err = z.refreshLocked(ctx)
	return z.version != before, z.err
}

func (z *zoneCache) refreshLocked(ctx context.Context) error {
	z.triedAt = time.Now()
	parents := map[types.ManagedObjectReference]types.ManagedObjectReference{}
	var hosts []types.ManagedObjectReference
	err := z.c.do(ctx, "read the host ancestry of vCenter "+z.c.vc.Server, func(ctx context.Context, vc *vim25.Client, _ uint64) error {
		m := view.NewManager(vc)
		v, err := m.CreateContainerView(ctx, vc.ServiceContent.RootFolder,
			[]string{"HostSystem", "ComputeResource", "ClusterComputeResource", "Folder", "Datacenter"}, true)
		if err != nil {
			return err
		}
		defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
		var ocs []types.ObjectContent
		if err := v.Retrieve(ctx, []string{"ManagedEntity"}, []string{"parent"}, &ocs); err != nil {
			return err
		}
		for _, oc := range ocs {
			for _, p := range oc.PropSet {
				if ref, ok := p.Val.(types.ManagedObjectReference); ok && p.Name == "parent" {
					parents[oc.Obj] = ref
				}
			}
			if oc.Obj.Type == "HostSystem" {
				hosts = append(hosts, oc.Obj)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The objects whose tags count: every host and its ancestors.
	chains := make(map[types.ManagedObjectReference][]types.ManagedObjectReference, len(hosts))
	seen := map[types.ManagedObjectReference]bool{}
	var objs []mo.Reference
	for _, h := range hosts {
		var chain []types.ManagedObjectReference
		for ref, ok := h, true; ok && len(chain) < 64; ref, ok = parents[ref] {
			chain = append(chain, ref)
			if !seen[ref] {
				seen[ref] = true
				objs = append(objs, ref)
			}
		}
		chains[h] = chain
	}
	byObj := map[types.ManagedObjectReference][]string{}
	if len(objs) > 0 {
		err = z.c.doREST(ctx, "read the tags of hosts, clusters and datacenters of vCenter "+z.c.vc.Server, func(ctx context.Context, rc *rest.Client) error {
			m := tags.NewManager(rc)
			attached, err := m.ListAttachedTagsOnObjects(ctx, objs)
			if err != nil {
				return err
			}
			for _, a := range attached {
				byObj[a.ObjectID.Reference()] = a.TagIDs
			}
			return z.resolveTags(ctx, m, byObj)
		})
		if err != nil {
			return err
		}
	}
	byHost := make(map[types.ManagedObjectReference]zoneData, len(hosts))
	for h, chain := range chains {
		var d zoneData
		for _, ref := range chain {
			for _, id := range byObj[ref] {
				t := z.tags[id]
				switch z.cats[t.categoryID].name {
				case z.labels.Zone:
					if d.zone == "" {
						d.zone = t.name
					}
				case z.labels.Region:
					if d.region == "" {
						d.region = t.name
					}
				}
			}
		}
		byHost[h] = d
	}
	if !maps.Equal(byHost, z.byHost) {
		z.version++
	}
	z.byHost, z.loadedAt = byHost, time.Now()
	return nil
}

// resolveTags makes sure every tag in byObj and its category are known,
// asking vCenter only for those not cached (or cached too long).
func (z *zoneCache) resolveTags(ctx context.Context, m *tags.Manager, byObj map[types.ManagedObjectReference][]string) error {
	now := time.Now()
	for _, ids := range byObj {
		for _, id := range ids {
			if t, ok := z.tags[id]; ok && now.Sub(t.at) < tagInfoTTL {
				continue
			}
			t, err := m.GetTag(ctx, id)
			if err != nil {
				if restStatus(err) == 404 {
					continue // deleted since it was listed
				}
				return fmt.Errorf("get tag %s: %w", id, err)
			}
			z.tags[id] = tagInfo{name: t.Name, categoryID: t.CategoryID, at: now}
		}
	}
	for _, t := range z.tags {
		if c, ok := z.cats[t.categoryID]; ok && now.Sub(c.at) < tagInfoTTL {
			continue
		}
		cat, err := m.GetCategory(ctx, t.categoryID)
		if err != nil {
			if restStatus(err) == 404 {
				continue
			}
			return fmt.Errorf("get tag category %s: %w", t.categoryID, err)
		}
		z.cats[t.categoryID] = catInfo{name: cat.Name, at: now}
	}
	return nil
}

package vsphere

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"
)

// Watch settings.
var (
	// resyncPeriod is how often the watch starts over with a full sync,
	// so that an update vCenter failed to deliver is not missed forever.
	resyncPeriod = 10 * time.Minute
	// maxWaitSeconds bounds one WaitForUpdatesEx long poll.
	maxWaitSeconds int32 = 60
	// pageSize caps the objects of one RetrievePropertiesEx or
	// WaitForUpdatesEx answer.
	pageSize int32 = 1000
	// watchBackoff is the first and watchMaxBackoff the longest wait
	// before the watch is set up again after a failure.
	watchBackoff    = time.Second
	watchMaxBackoff = 30 * time.Second
)

// inventory is one vCenter's VMs: a map kept current by a watch
// (WaitForUpdatesEx on a PropertyCollector of the provider's own), or
// retrieved in one paged call while the watch has not synced.
type inventory struct {
	c *conn

	mu       sync.Mutex
	vms      map[types.ManagedObjectReference]*vm
	watching bool  // a watch loop runs
	synced   bool  // the watch delivered a full sync and has not failed since
	watchErr error // why the watch is broken, while it is

	// views are the ContainerViews of VMs of session generation viewGen.
	viewMu  sync.Mutex
	views   []types.ManagedObjectReference
	viewGen uint64
}

func newInventory(c *conn) *inventory {
	return &inventory{c: c, vms: map[types.ManagedObjectReference]*vm{}}
}

// containerViews returns the session's ContainerViews of VMs: one on the
// root folder, or one per configured datacenter. They live as long as the
// session.
func (inv *inventory) containerViews(ctx context.Context, vc *vim25.Client, gen uint64) ([]types.ManagedObjectReference, error) {
	inv.viewMu.Lock()
	defer inv.viewMu.Unlock()
	if inv.viewGen == gen && inv.views != nil {
		return inv.views, nil
	}
	containers := []types.ManagedObjectReference{vc.ServiceContent.RootFolder}
	if dcs := inv.c.vc.Datacenters; len(dcs) > 0 {
		containers = containers[:0]
		finder := find.NewFinder(vc, false)
		for _, name := range dcs {
			dc, err := finder.Datacenter(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("datacenter %q of vCenter %s: %w", name, inv.c.vc.Server, err)
			}
			containers = append(containers, dc.Reference())
		}
	}
	m := view.NewManager(vc)
	views := make([]types.ManagedObjectReference, 0, len(containers))
	for _, c := range containers {
		v, err := m.CreateContainerView(ctx, c, []string{"VirtualMachine"}, true)
		if err != nil {
			return nil, err
		}
		views = append(views, v.Reference())
	}
	inv.views, inv.viewGen = views, gen
	return views, nil
}

// filterSpec selects vmProperties of every VM in views.
func filterSpec(views []types.ManagedObjectReference) types.PropertyFilterSpec {
	spec := types.PropertyFilterSpec{PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: vmProperties}}}
	for _, v := range views {
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{
			Obj:       v,
			Skip:      types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ContainerView", Path: "view"}},
		})
	}
	return spec
}

// withViews runs fn with the session's views, recreating them once when
// vCenter no longer knows them.
func (inv *inventory) withViews(ctx context.Context, what string, fn func(context.Context, *vim25.Client, []types.ManagedObjectReference) error) error {
	return inv.c.do(ctx, what, func(ctx context.Context, vc *vim25.Client, gen uint64) error {
		views, err := inv.containerViews(ctx, vc, gen)
		if err != nil {
			return err
		}
		return inv.viewsGone(ctx, vc, gen, fn(ctx, vc, views))
	})
}

// errSessionGone says the session's objects are gone although vCenter
// answered without NotAuthenticated (vcsim answers property retrieves
// without a session); the caller logs in again.
var errSessionGone = errors.New("the vCenter session is gone")

// viewsGone handles err when it says one of the session's views no longer
// exists: the views are created again, and when the session itself is gone
// err becomes errSessionGone.
func (inv *inventory) viewsGone(ctx context.Context, vc *vim25.Client, gen uint64, err error) error {
	var nf types.ManagedObjectNotFound
	if err == nil || !asFault(err, &nf) || nf.Obj.Type != "ContainerView" {
		return err
	}
	inv.viewMu.Lock()
	if inv.viewGen == gen {
		inv.views = nil
	}
	inv.viewMu.Unlock()
	if us, serr := session.NewManager(vc).UserSession(ctx); serr == nil && us == nil || isNotAuthenticated(serr) {
		return fmt.Errorf("%w: %w", errSessionGone, err)
	}
	return err
}

// retrieve lists every VM in one paged RetrievePropertiesEx.
func (inv *inventory) retrieve(ctx context.Context) (map[types.ManagedObjectReference]*vm, error) {
	var out map[types.ManagedObjectReference]*vm
	err := inv.withViews(ctx, "list VMs of vCenter "+inv.c.vc.Server, func(ctx context.Context, vc *vim25.Client, views []types.ManagedObjectReference) error {
		res, err := property.DefaultCollector(vc).RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{filterSpec(views)}}, pageSize)
		if err != nil {
			return err
		}
		out = make(map[types.ManagedObjectReference]*vm, len(res.Returnval))
		for _, oc := range res.Returnval {
			r := &vm{ref: oc.Obj}
			for _, p := range oc.PropSet {
				r.set(p.Name, p.Val)
			}
			out[oc.Obj] = r
		}
		return nil
	})
	return out, err
}

// list returns the VMs: from the watch when it has synced and works,
// otherwise from a retrieve made now.
func (inv *inventory) list(ctx context.Context) ([]*vm, error) {
	inv.mu.Lock()
	if inv.synced {
		out := inv.snapshotLocked()
		inv.mu.Unlock()
		return out, nil
	}
	inv.mu.Unlock()
	vms, err := inv.retrieve(ctx)
	if err != nil {
		return nil, err
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if !inv.watching {
		inv.vms = keepUUIDs(vms, inv.vms)
	}
	out := make([]*vm, 0, len(vms))
	for _, r := range vms {
		out = append(out, r)
	}
	return out, nil
}

func (inv *inventory) snapshotLocked() []*vm {
	out := make([]*vm, 0, len(inv.vms))
	for _, r := range inv.vms {
		c := *r
		out = append(out, &c)
	}
	return out
}

// keepUUIDs carries the last known UUID of VMs that have none in a new
// listing over from the old one.
func keepUUIDs(fresh, old map[types.ManagedObjectReference]*vm) map[types.ManagedObjectReference]*vm {
	for ref, r := range fresh {
		if o := old[ref]; r.uuid == "" && o != nil {
			r.uuid = o.uuid
		}
	}
	return fresh
}

// watch keeps the inventory current until ctx ends, calling changed after
// every applied change. After a failure (a collector fault, a lost
// session, vCenter unreachable) it marks the inventory broken, so that
// listings retrieve afresh or fail, and sets the watch up again with a
// backoff.
func (inv *inventory) watch(ctx context.Context, changed func()) {
	inv.mu.Lock()
	if inv.watching {
		inv.mu.Unlock()
		<-ctx.Done()
		return
	}
	inv.watching = true
	inv.mu.Unlock()
	defer func() {
		inv.mu.Lock()
		inv.watching, inv.synced = false, false
		inv.mu.Unlock()
	}()
	logger := klog.FromContext(ctx).WithValues("vcenter", inv.c.vc.Server)
	backoff := watchBackoff
	for ctx.Err() == nil {
		synced, err := inv.watchOnce(ctx, changed)
		if ctx.Err() != nil {
			return
		}
		if synced {
			backoff = watchBackoff
		}
		if err == nil {
			continue // periodic resync
		}
		inv.mu.Lock()
		wasSynced := inv.synced
		inv.synced, inv.watchErr = false, err
		inv.mu.Unlock()
		if wasSynced {
			changed()
		}
		logger.Error(err, "VM watch failed; listings retrieve from vCenter until it is set up again", "retryIn", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-inv.c.credsChanged:
			t.Stop()
		}
		backoff = min(2*backoff, watchMaxBackoff)
	}
}

// watchOnce runs one PropertyCollector until the resync period ends (nil)
// or it fails. synced reports whether it completed its initial sync.
func (inv *inventory) watchOnce(ctx context.Context, changed func()) (synced bool, err error) {
	vc, gen, err := inv.c.client(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		if isNotAuthenticated(err) {
			inv.c.dropSession(gen)
		}
		if err != nil {
			err = classify("watch VMs of vCenter "+inv.c.vc.Server, err)
		}
	}()
	setupCtx, cancel := withDefaultTimeout(ctx)
	views, err := inv.containerViews(setupCtx, vc, gen)
	if err != nil {
		cancel()
		return false, err
	}
	pc, err := property.DefaultCollector(vc).Create(setupCtx)
	if err != nil {
		cancel()
		return false, err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer dcancel()
		_ = pc.Destroy(dctx)
	}()
	_, err = pc.CreateFilter(setupCtx, types.CreateFilter{Spec: filterSpec(views)})
	err = inv.viewsGone(setupCtx, vc, gen, err)
	cancel()
	if err != nil {
		return false, err
	}

	deadline := time.Now().Add(resyncPeriod)
	fresh := map[types.ManagedObjectReference]*vm{}
	version := ""
	for {
		if synced && time.Now().After(deadline) {
			return true, nil
		}
		wait := maxWaitSeconds
		req := types.WaitForUpdatesEx{This: pc.Reference(), Version: version,
			Options: &types.WaitOptions{MaxWaitSeconds: &wait, MaxObjectUpdates: pageSize}}
		wctx, wcancel := context.WithTimeout(ctx, time.Duration(wait)*time.Second+time.Minute)
		res, err := methods.WaitForUpdatesEx(wctx, vc, &req)
		wcancel()
		if err != nil {
			return synced, err
		}
		set := res.Returnval
		if set == nil {
			continue // the long poll ended without changes
		}
		version = set.Version
		truncated := set.Truncated != nil && *set.Truncated
		var updates []types.ObjectUpdate
		for _, fs := range set.FilterSet {
			updates = append(updates, fs.ObjectSet...)
		}
		if !synced {
			var refetch []types.ManagedObjectReference
			for _, u := range updates {
				if applyUpdate(fresh, u) {
					refetch = append(refetch, u.Obj)
				}
			}
			if err := inv.refetch(ctx, vc, fresh, refetch); err != nil {
				return false, err
			}
			if truncated {
				continue
			}
			synced = true
			inv.mu.Lock()
			old := inv.vms
			inv.vms = keepUUIDs(fresh, old)
			inv.synced, inv.watchErr = true, nil
			inv.mu.Unlock()
			changed()
			continue
		}
		if inv.apply(ctx, vc, updates) {
			changed()
		}
	}
}

// apply applies watch updates to the live inventory and reports whether
// any VM changed.
func (inv *inventory) apply(ctx context.Context, vc *vim25.Client, updates []types.ObjectUpdate) bool {
	inv.mu.Lock()
	before := make(map[types.ManagedObjectReference]*vm, len(updates))
	for _, u := range updates {
		if _, seen := before[u.Obj]; seen {
			continue
		}
		if r := inv.vms[u.Obj]; r != nil {
			c := *r
			before[u.Obj] = &c
		} else {
			before[u.Obj] = nil
		}
	}
	var refetch []types.ManagedObjectReference
	for _, u := range updates {
		if applyUpdate(inv.vms, u) {
			refetch = append(refetch, u.Obj)
		}
	}
	inv.mu.Unlock()
	if len(refetch) > 0 {
		// Rare: vCenter reported a property path the provider did not ask
		// for; read the VM's properties again rather than guess.
		inv.mu.Lock()
		err := inv.refetch(ctx, vc, inv.vms, refetch)
		inv.mu.Unlock()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Re-reading VMs after an unexpected watch update", "vcenter", inv.c.vc.Server)
		}
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	changed := false
	for ref, b := range before {
		a := inv.vms[ref]
		if (a == nil) != (b == nil) || (a != nil && !a.equal(b)) {
			changed = true
		}
	}
	return changed
}

// applyUpdate applies one object update to vms. Enter is an upsert (vcsim
// sends Enter again for every object when the view changes). It reports
// whether the update named a property it does not know.
func applyUpdate(vms map[types.ManagedObjectReference]*vm, u types.ObjectUpdate) (unknown bool) {
	switch u.Kind {
	case types.ObjectUpdateKindLeave:
		delete(vms, u.Obj)
		return false
	case types.ObjectUpdateKindEnter:
		old := vms[u.Obj]
		r := &vm{ref: u.Obj}
		if old != nil {
			r.uuid = old.uuid
		}
		vms[u.Obj] = r
	}
	r := vms[u.Obj]
	if r == nil {
		r = &vm{ref: u.Obj}
		vms[u.Obj] = r
	}
	for _, ch := range u.ChangeSet {
		var val any
		if ch.Op != types.PropertyChangeOpRemove && ch.Op != types.PropertyChangeOpIndirectRemove {
			val = ch.Val
		}
		if !r.set(ch.Name, val) {
			unknown = true
		}
	}
	return unknown
}

// refetch reads the properties of refs into vms.
func (inv *inventory) refetch(ctx context.Context, vc *vim25.Client, vms map[types.ManagedObjectReference]*vm, refs []types.ManagedObjectReference) error {
	if len(refs) == 0 {
		return nil
	}
	var ocs []types.ObjectContent
	if err := property.DefaultCollector(vc).Retrieve(ctx, refs, vmProperties, &ocs); err != nil {
		if !fault.Is(err, &types.ManagedObjectNotFound{}) {
			return err
		}
	}
	for _, oc := range ocs {
		r := &vm{ref: oc.Obj}
		if old := vms[oc.Obj]; old != nil {
			r.uuid = old.uuid
		}
		for _, p := range oc.PropSet {
			r.set(p.Name, p.Val)
		}
		vms[oc.Obj] = r
	}
	return nil
}

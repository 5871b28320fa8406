package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/vcsim"
)

// watching starts WatchInstances and waits until the watch has synced.
func watching(t *testing.T, c *Cloud) *atomic.Int64 {
	t.Helper()
	var changes atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.WatchInstances(ctx, func() { changes.Add(1) }); err != nil {
			t.Errorf("WatchInstances: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	testsupport.EventuallyState(t, 30*time.Second, "the watch to sync", func(context.Context) (bool, string) {
		return c.synced(), fmt.Sprintf("%d changes", changes.Load())
	})
	return &changes
}

// synced reports whether every vCenter's watch has synced.
func (c *Cloud) synced() bool {
	for _, v := range c.vcs {
		v.inv.mu.Lock()
		ok := v.inv.synced
		v.inv.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

func listed(t *testing.T, c *Cloud, name string) (stratus.Instance, bool, string) {
	list, err := c.ListInstances(t.Context())
	if err != nil {
		return stratus.Instance{}, false, err.Error()
	}
	inst, ok := byName(list)[name]
	return inst, ok, fmt.Sprintf("%d instances", len(list))
}

func TestWatchDeliversChanges(t *testing.T) {
	s := newSim(t)
	rec := &recorder{}
	c := s.cloud(s.config(""), rec)
	changes := watching(t, c)

	// Listings come from the watch: no request to vCenter.
	before := rec.count("RetrievePropertiesEx")
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := rec.count("RetrievePropertiesEx"); after != before {
		t.Errorf("a listing after the watch synced made %d retrieves", after-before)
	}

	n := changes.Load()
	s.do("power off", s.srv.PowerOff(s.ctx, "node-2"))
	testsupport.EventuallyState(t, 30*time.Second, "the watch to report the power-off", func(context.Context) (bool, string) {
		inst, ok, state := listed(t, c, "node-2")
		return ok && inst.Shutdown && changes.Load() > n, state
	})

	n = changes.Load()
	s.do("destroy", s.srv.Destroy(s.ctx, "node-2"))
	testsupport.EventuallyState(t, 30*time.Second, "the watch to report the destroy", func(context.Context) (bool, string) {
		_, ok, state := listed(t, c, "node-2")
		return !ok && state == "3 instances" && changes.Load() > n, state
	})

	n = changes.Load()
	_, err := s.srv.Create(s.ctx, vcsim.VMSpec{Name: "worker-new", Guest: &vcsim.Guest{Hostname: "worker-new"}})
	s.do("create", err)
	testsupport.EventuallyState(t, 30*time.Second, "the watch to report the new VM", func(context.Context) (bool, string) {
		inst, ok, state := listed(t, c, "worker-new")
		return ok && !inst.Shutdown && inst.MetadataErr != nil && changes.Load() > n, state
	})

	n = changes.Load()
	s.setGuest("worker-new", "worker-new", nic("VM Network", "10.1.0.7"))
	testsupport.EventuallyState(t, 30*time.Second, "the watch to report the guest's IP", func(context.Context) (bool, string) {
		inst, ok, state := listed(t, c, "worker-new")
		return ok && inst.MetadataErr == nil && len(inst.Metadata.NodeAddresses) == 3 && changes.Load() > n,
			fmt.Sprintf("%s %v %v", state, inst.Metadata.NodeAddresses, inst.MetadataErr)
	})
	for _, p := range rec.allPaths() {
		if p == "config" || p == "summary" || p == "guest" {
			t.Errorf("a request asked for %q", p)
		}
	}
}

func TestWatchRecoversFromSessionLoss(t *testing.T) {
	s := newSim(t)
	rec := &recorder{}
	c := s.cloud(s.config(""), rec)
	watching(t, c)
	logins := rec.count("Login")

	// vCenter ends the provider's session (as after a restart or an idle
	// timeout): the watch and listings log in again.
	s.terminateSessions()
	s.do("power off", s.srv.PowerOff(s.ctx, "node-1"))
	// The pending long poll still delivers the power-off; the next one
	// finds the session gone.
	testsupport.EventuallyState(t, 30*time.Second, "the power-off, a new login and a synced watch", func(context.Context) (bool, string) {
		inst, ok, state := listed(t, c, "node-1")
		return ok && inst.Shutdown && rec.count("Login") > logins && c.synced(), fmt.Sprintf("%s, %d logins", state, rec.count("Login"))
	})
	// The new collector delivers changes.
	s.do("power on", s.srv.PowerOn(s.ctx, "node-1"))
	testsupport.EventuallyState(t, 30*time.Second, "the power-on after the watch recovered", func(context.Context) (bool, string) {
		inst, ok, state := listed(t, c, "node-1")
		return ok && !inst.Shutdown, state
	})
}

func TestListingRecoversFromSessionLoss(t *testing.T) {
	s := newSim(t)
	c := s.cloud(s.config(""), nil)
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.terminateSessions()
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatalf("ListInstances after the session was terminated: %v", err)
	}
}

func TestWrongPassword(t *testing.T) {
	s := newSim(t)
	c := s.cloud(strings.Replace(s.config(""), "password: "+s.srv.Password(), "password: wrong-pw", 1), nil)
	_, err := c.ListInstances(t.Context())
	if !errors.Is(err, ErrInvalidLogin) {
		t.Fatalf("ListInstances with a wrong password: %v, want ErrInvalidLogin", err)
	}
	if stratus.IsTransient(err) || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("error %q is transient or shows the password", err)
	}
	node := nodeNamed("node-1")
	if ok, err := c.InstanceExists(t.Context(), node); err == nil || ok {
		t.Errorf("InstanceExists with a wrong password = %t, %v; want an error", ok, err)
	}
	if _, err := c.InstanceMetadata(t.Context(), node); err == nil || !errors.Is(err, ErrInvalidLogin) {
		t.Errorf("InstanceMetadata with a wrong password: %v", err)
	}
	// The watch fails the same way and never reports an empty inventory.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.WatchInstances(ctx, func() {})
	}()
	testsupport.EventuallyState(t, 30*time.Second, "the watch to fail", func(context.Context) (bool, string) {
		v := c.vcs[0].inv
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.watchErr != nil, ""
	})
	if _, err := c.ListInstances(t.Context()); !errors.Is(err, ErrInvalidLogin) {
		t.Errorf("ListInstances while the watch fails: %v", err)
	}
	cancel()
	<-done
}

func TestVCenterStopped(t *testing.T) {
	s := newSim(t)
	c := s.cloud(s.config(""), nil)
	watching(t, c)
	plain := s.cloud(s.config(""), nil)
	if _, err := plain.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	// vCenter goes away with the watch's long poll in flight.
	s.srv.Stop()
	testsupport.EventuallyState(t, 30*time.Second, "listings to fail", func(context.Context) (bool, string) {
		_, err := c.ListInstances(t.Context())
		return err != nil, fmt.Sprint(err)
	})
	_, err := c.ListInstances(t.Context())
	if !stratus.IsTransient(err) {
		t.Errorf("ListInstances with vCenter down: %v, want a transient error", err)
	}
	if _, err := plain.ListInstances(t.Context()); !stratus.IsTransient(err) {
		t.Errorf("ListInstances (no watch) with vCenter down: %v, want a transient error", err)
	}
	if ok, err := plain.InstanceExists(t.Context(), nodeNamed("node-1")); err == nil || ok {
		t.Errorf("InstanceExists with vCenter down = %t, %v", ok, err)
	}
}

// terminateSessions ends every session but the administrator's.
func (s *sim) terminateSessions() {
	s.t.Helper()
	var sm mo.SessionManager
	m := session.NewManager(s.admin)
	if err := property.DefaultCollector(s.admin).RetrieveOne(s.ctx, m.Reference(), []string{"sessionList"}, &sm); err != nil {
		s.t.Fatal(err)
	}
	current, err := m.UserSession(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	var others []string
	for _, us := range sm.SessionList {
		if us.Key != current.Key {
			others = append(others, us.Key)
		}
	}
	if err := m.TerminateSession(s.ctx, others); err != nil {
		s.t.Fatalf("terminate sessions: %v", err)
	}
}

// TestKeepalive: with a session idle timeout, the provider's session stays
// valid while an idle session without keepalive expires.
func TestKeepalive(t *testing.T) {
	s := newSim(t, func(o *vcsim.Options) { o.SessionTimeout = time.Second })
	rec := &recorder{}
	c := s.cloud(s.config(""), rec)
	c.vcs[0].conn.keepalive = 100 * time.Millisecond
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	idle, err := s.srv.Client(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	idleSession, err := idle.SessionManager.UserSession(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 30*time.Second, "the idle session to expire", func(context.Context) (bool, string) {
		var sm mo.SessionManager
		if err := property.DefaultCollector(s.admin).RetrieveOne(s.ctx, *s.admin.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
			return false, err.Error()
		}
		for _, us := range sm.SessionList {
			if us.Key == idleSession.Key {
				return false, fmt.Sprintf("%d sessions", len(sm.SessionList))
			}
		}
		return true, ""
	})
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("Login"); n != 1 {
		t.Errorf("%d logins: the provider's session expired too", n)
	}
	if rec.count("CurrentTime") == 0 {
		t.Error("no keepalive request")
	}
}

// TestPaging: listings and the watch's initial sync span several pages.
func TestPaging(t *testing.T) {
	old := pageSize
	t.Cleanup(func() { pageSize = old }) // after the watch stopped
	pageSize = 1
	s := newSim(t)
	rec := &recorder{}
	c := s.cloud(s.config(""), rec)
	list, err := c.ListInstances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 4 || rec.count("ContinueRetrievePropertiesEx") == 0 {
		t.Errorf("%d instances listed with %d continuations", len(list), rec.count("ContinueRetrievePropertiesEx"))
	}
	watching(t, c)
	if n := rec.count("WaitForUpdatesEx"); n < 4 {
		t.Errorf("the initial sync took %d WaitForUpdatesEx calls, want one per VM", n)
	}
	list, err = c.ListInstances(t.Context())
	if err != nil || len(list) != 4 {
		t.Errorf("listing from the watch: %d instances, %v", len(list), err)
	}
}

package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	k8stypes "k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/vcsim"
)

// tag attaches a tag of category to the inventory object at path.
func (s *sim) tag(m *tags.Manager, category, name string, obj types.ManagedObjectReference) {
	s.t.Helper()
	cats, err := m.GetCategories(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	catID := ""
	for _, c := range cats {
		if c.Name == category {
			catID = c.ID
		}
	}
	if catID == "" {
		if catID, err = m.CreateCategory(s.ctx, &tags.Category{Name: category, Cardinality: "SINGLE"}); err != nil {
			s.t.Fatal(err)
		}
	}
	id, err := m.CreateTag(s.ctx, &tags.Tag{Name: name, CategoryID: catID})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := m.AttachTag(s.ctx, id, obj); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sim) tags() *tags.Manager {
	s.t.Helper()
	rc, err := s.srv.RESTClient(s.ctx)
	if err != nil {
		s.t.Fatalf("REST login: %v", err)
	}
	return tags.NewManager(rc)
}

func TestZonesFromTags(t *testing.T) {
	// vcsim tags DC0 with region-1, cluster DC0_C0 with zone-a and host
	// DC0_H0 with zone-b; a host's own tag beats its cluster's.
	s := newSim(t)
	m := s.tags()
	s.tag(m, "k8s-zone", "zone-c", s.ref("HostSystem", "DC0_C0_H0"))
	s.tag(m, "other", "not-a-zone", s.ref("HostSystem", "DC0_C0_H1"))

	rec := &recorder{}
	c := s.cloud(s.strictConfig("    caFile: "+s.srv.CAFile()+"\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n"), rec)
	list, err := c.ListInstances(t.Context())
	if err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	if len(list) != 4 {
		t.Fatalf("%d instances", len(list))
	}
	for _, inst := range list {
		vm := s.vm(inst.Name)
		want := vm.Zone
		if vm.Host == "DC0_C0_H0" {
			want = "zone-c"
		}
		if inst.Metadata.Zone != want || inst.Metadata.Region != "region-1" || inst.MetadataErr != nil {
			t.Errorf("%s on %s: zone %q region %q (%v), want %q region-1", inst.Name, vm.Host, inst.Metadata.Zone, inst.Metadata.Region, inst.MetadataErr, want)
		}
	}
	if s.vm("node-1").Zone != "zone-b" {
		t.Fatalf("node-1 is in %s, the test expects zone-b", s.vm("node-1").Zone)
	}
	batched := 0
	for _, r := range rec.rest {
		if strings.Contains(r, "tagging/tag-association") {
			batched++
		}
	}
	if batched != 1 {
		t.Errorf("%d tag-association calls, want 1 batched call: %v", batched, rec.rest)
	}
	// The next listing uses the cached zones.
	restBefore := len(rec.rest)
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.rest) - restBefore; n != 0 {
		t.Errorf("a second listing made %d REST calls", n)
	}

	// Zones answers from the same data.
	z, err := c.GetZoneByProviderID(t.Context(), "vsphere://"+s.vm("node-1").UUID)
	if err != nil || z != (cloudprovider.Zone{FailureDomain: "zone-b", Region: "region-1"}) {
		t.Errorf("GetZoneByProviderID = %+v, %v", z, err)
	}
	z, err = c.GetZoneByNodeName(t.Context(), k8stypes.NodeName("node-3"))
	if err != nil || z != (cloudprovider.Zone{FailureDomain: "zone-b", Region: "region-1"}) {
		t.Errorf("GetZoneByNodeName = %+v, %v", z, err)
	}
	if _, err := c.GetZoneByNodeName(t.Context(), "nobody"); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("GetZoneByNodeName(nobody) = %v", err)
	}
}

func TestNoZonesWithoutLabels(t *testing.T) {
	s := newSim(t) // its hosts and clusters have zone tags
	rec := &recorder{}
	c := s.cloud(s.config(""), rec)
	list, err := c.ListInstances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range list {
		if inst.Metadata.Zone != "" || inst.Metadata.Region != "" {
			t.Errorf("%s has zone %q region %q without labels configured", inst.Name, inst.Metadata.Zone, inst.Metadata.Region)
		}
	}
	if len(rec.rest) != 0 {
		t.Errorf("REST calls without labels: %v", rec.rest)
	}
}

func TestTLS(t *testing.T) {
	s := newSim(t)
	for _, tc := range []struct {
		name, tls string
		ok        bool
	}{
		{"CA file", "    caFile: " + s.srv.CAFile() + "\n", true},
		{"SHA-1 thumbprint", "    thumbprint: " + s.srv.Thumbprint() + "\n", true},
		{"insecure", "    insecureFlag: true\n", true},
		{"system CAs only", "", false},
		{"wrong thumbprint", "    thumbprint: 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.cloud(s.strictConfig(tc.tls), nil)
			_, err := c.ListInstances(t.Context())
			if tc.ok {
				if err != nil {
					t.Fatalf("ListInstances: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "TLS: ") || stratus.IsTransient(err) {
				t.Fatalf("ListInstances with an untrusted certificate: %v; want a TLS error that is not transient", err)
			}
		})
	}
}

// TestExpiredSessionsLogInAgain: without keepalives, both sessions expire
// when idle; the next listing and zone refresh log in again (SOAP after
// NotAuthenticated, REST after 401) instead of failing.
func TestExpiredSessionsLogInAgain(t *testing.T) {
	s := newSim(t, func(o *vcsim.Options) { o.SessionTimeout = time.Second })
	rec := &recorder{}
	c := s.cloud(s.config("labels:\n  zone: k8s-zone\n  region: k8s-region\n"), rec)
	c.vcs[0].conn.keepalive = time.Hour
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	restLogins := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, r := range rec.rest {
			if r == "POST /rest/com/vmware/cis/session" {
				n++
			}
		}
		return n
	}
	if restLogins() != 1 {
		t.Fatalf("REST requests: %v", rec.rest)
	}
	testsupport.EventuallyState(t, 30*time.Second, "the provider's sessions to expire", func(context.Context) (bool, string) {
		var sm mo.SessionManager
		if err := property.DefaultCollector(s.admin).RetrieveOne(s.ctx, *s.admin.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
			return false, err.Error()
		}
		return len(sm.SessionList) <= 1, fmt.Sprintf("%d sessions", len(sm.SessionList))
	})
	if _, err := c.vcs[0].zones.refresh(t.Context()); err != nil {
		t.Fatalf("zone refresh after the sessions expired: %v", err)
	}
	list, err := c.ListInstances(t.Context())
	if err != nil {
		t.Fatalf("ListInstances after the sessions expired: %v", err)
	}
	if inst := byName(list)["node-0"]; inst.Metadata.Zone != s.vm("node-0").Zone || inst.Metadata.Zone == "" {
		t.Errorf("zone after re-login = %q", inst.Metadata.Zone)
	}
	if rec.count("Login") != 2 || restLogins() != 2 {
		t.Errorf("%d SOAP and %d REST logins, want 2 each", rec.count("Login"), restLogins())
	}
}

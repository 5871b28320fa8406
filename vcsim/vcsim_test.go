package vcsim_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/vcsim"
)

// start runs a server for the test and closes it at the end.
func start(t *testing.T, opts vcsim.Options) *vcsim.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := vcsim.Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, s *vcsim.Server) *vim25.Client {
	t.Helper()
	c, err := s.Client(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return c.Client
}

// guestOf retrieves, over SOAP, what a CCM reads from a VM.
func guestOf(t *testing.T, c *vim25.Client, name string) mo.VirtualMachine {
	t.Helper()
	ctx := testContext(t)
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Destroy(ctx) }()
	var vms []mo.VirtualMachine
	err = v.RetrieveWithFilter(ctx, []string{"VirtualMachine"},
		[]string{"name", "config.uuid", "runtime.powerState", "runtime.host", "guest.hostName", "guest.ipAddress", "guest.net"},
		&vms, property.Match{"name": name})
	if err != nil {
		t.Fatalf("retrieve VM %s: %v", name, err)
	}
	if len(vms) != 1 {
		t.Fatalf("retrieve VM %s: got %d VMs", name, len(vms))
	}
	return vms[0]
}

func TestInventory(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 4})
	c := client(t, s)
	ctx := testContext(t)
	finder := find.NewFinder(c, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	clusters, err := finder.ClusterComputeResourceList(ctx, "*")
	if err != nil || len(clusters) != 1 {
		t.Fatalf("clusters: %v, %v", clusters, err)
	}
	clusterHosts, err := clusters[0].Hosts(ctx)
	if err != nil || len(clusterHosts) != 3 {
		t.Fatalf("hosts of %s: %v, %v", clusters[0].Name(), clusterHosts, err)
	}
	hosts, err := finder.HostSystemList(ctx, "*")
	if err != nil || len(hosts) != 4 {
		t.Fatalf("hosts: %v, %v", hosts, err)
	}
	vms, err := finder.VirtualMachineList(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, vm := range vms {
		names = append(names, vm.Name())
	}
	slices.Sort(names)
	if want := []string{"node-0", "node-1", "node-2", "node-3"}; !slices.Equal(names, want) || !slices.Equal(s.Nodes(), want) {
		t.Errorf("VMs = %v, Nodes() = %v, want %v", names, s.Nodes(), want)
	}
	if got := s.Datacenters(); !slices.Equal(got, []string{"DC0"}) {
		t.Errorf("Datacenters() = %v", got)
	}
	if got := s.Zones(); !slices.Equal(got, []string{"zone-a", "zone-b"}) {
		t.Errorf("Zones() = %v", got)
	}
	// Round-robin: even nodes in the cluster, odd ones on the standalone host.
	for i, want := range []struct{ zone, hostPrefix string }{{"zone-a", "DC0_C0_H"}, {"zone-b", "DC0_H0"}, {"zone-a", "DC0_C0_H"}, {"zone-b", "DC0_H0"}} {
		vm, err := s.VM(ctx, s.Nodes()[i])
		if err != nil {
			t.Fatal(err)
		}
		if vm.Zone != want.zone || vm.Region != "region-1" || vm.Datacenter != "DC0" || !strings.HasPrefix(vm.Host, want.hostPrefix) {
			t.Errorf("%s: zone %q region %q dc %q host %q, want %s on %s*", vm.Name, vm.Zone, vm.Region, vm.Datacenter, vm.Host, want.zone, want.hostPrefix)
		}
		if vm.PowerState != types.VirtualMachinePowerStatePoweredOn || vm.UUID == "" || vm.UUID != strings.ToLower(vm.UUID) {
			t.Errorf("%s: power %s uuid %q", vm.Name, vm.PowerState, vm.UUID)
		}
	}
	// The SearchIndex lookups upstream uses find the VM.
	vm, _ := s.VM(ctx, "node-2")
	si := object.NewSearchIndex(c)
	for what, find := range map[string]func() (object.Reference, error){
		"uuid":     func() (object.Reference, error) { return si.FindByUuid(ctx, dc, vm.UUID, true, nil) },
		"dns name": func() (object.Reference, error) { return si.FindByDnsName(ctx, dc, "node-2", true) },
		"ip":       func() (object.Reference, error) { return si.FindByIp(ctx, dc, vcsim.NodeIPv4(2), true) },
	} {
		ref, err := find()
		if err != nil || ref == nil || ref.Reference() != vm.Ref {
			t.Errorf("find node-2 by %s: %v, %v; want %v", what, ref, err, vm.Ref)
		}
	}
}

func TestLayoutAndNamePattern(t *testing.T) {
	s := start(t, vcsim.Options{
		VMs: 6, NamePattern: "worker-%03d",
		Layout: vcsim.Layout{Datacenters: 2, Clusters: 1, ClusterHosts: 1, StandaloneHosts: 1},
	})
	ctx := testContext(t)
	if got := s.Datacenters(); !slices.Equal(got, []string{"DC0", "DC1"}) {
		t.Errorf("Datacenters() = %v", got)
	}
	want := map[string][2]string{ // VM -> zone, region
		"worker-000": {"zone-a", "region-1"}, "worker-001": {"zone-b", "region-1"},
		"worker-002": {"zone-c", "region-2"}, "worker-003": {"zone-d", "region-2"},
		"worker-004": {"zone-a", "region-1"}, "worker-005": {"zone-b", "region-1"},
	}
	vms, err := s.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != len(want) {
		t.Fatalf("VMs: %d, want %d", len(vms), len(want))
	}
	for _, vm := range vms {
		if w := want[vm.Name]; vm.Zone != w[0] || vm.Region != w[1] {
			t.Errorf("%s: %s/%s, want %s/%s", vm.Name, vm.Region, vm.Zone, w[1], w[0])
		}
	}
}

func TestBadOptions(t *testing.T) {
	for name, opts := range map[string]vcsim.Options{
		"NamePattern":    {NamePattern: "node"},
		"VMs":            {VMs: -1},
		"Layout":         {Layout: vcsim.Layout{Datacenters: 1}},
		"ClusterHosts":   {Layout: vcsim.Layout{Datacenters: 1, Clusters: 1}},
		"RegionCategory": {ZoneCategory: "same", RegionCategory: "same"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := vcsim.Start(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("Start: %v, want an error naming %s", err, name)
			}
		})
	}
}

func TestGuestInfo(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 3, IPv6: true})
	c := client(t, s)
	for i, name := range s.Nodes() {
		vm := guestOf(t, c, name)
		if vm.Guest.HostName != name || vm.Guest.IpAddress != vcsim.NodeIPv4(i) {
			t.Errorf("%s: guest hostName %q ipAddress %q", name, vm.Guest.HostName, vm.Guest.IpAddress)
		}
		if len(vm.Guest.Net) != 1 {
			t.Fatalf("%s: guest.net %+v", name, vm.Guest.Net)
		}
		n := vm.Guest.Net[0]
		if n.Network != "VM Network" || !slices.Equal(n.IpAddress, []string{vcsim.NodeIPv4(i), vcsim.NodeIPv6(i)}) || n.MacAddress == "" {
			t.Errorf("%s: guest.net[0] network %q ips %v mac %q", name, n.Network, n.IpAddress, n.MacAddress)
		}
	}
	if got := []string{vcsim.NodeIPv4(0), vcsim.NodeIPv4(251), vcsim.NodeIPv6(0), vcsim.NodeIPv6(15)}; !slices.Equal(got, []string{"10.0.0.1", "10.0.1.2", "fd00:10::1", "fd00:10::10"}) {
		t.Errorf("node addresses: %v", got)
	}
}

func TestTags(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 2})
	ctx := testContext(t)
	rc, err := s.RESTClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	finder := find.NewFinder(c, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	cluster, err := finder.ClusterComputeResource(ctx, "DC0_C0")
	if err != nil {
		t.Fatal(err)
	}
	host, err := finder.HostSystem(ctx, "DC0_H0")
	if err != nil {
		t.Fatal(err)
	}
	m := tags.NewManager(rc)
	attached, err := m.GetAttachedTagsOnObjects(ctx, []mo.Reference{dc, cluster, host})
	if err != nil {
		t.Fatal(err)
	}
	cats, err := m.GetCategories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	catName := map[string]string{}
	for _, c := range cats {
		catName[c.ID] = c.Name
	}
	got := map[string]string{}
	for _, a := range attached {
		for _, tag := range a.Tags {
			got[a.ObjectID.Reference().Value] += catName[tag.CategoryID] + "=" + tag.Name
		}
	}
	want := map[string]string{
		dc.Reference().Value:      "k8s-region=region-1",
		cluster.Reference().Value: "k8s-zone=zone-a",
		host.Reference().Value:    "k8s-zone=zone-b",
	}
	for ref, w := range want {
		if got[ref] != w {
			t.Errorf("tags on %s: %q, want %q (all: %v)", ref, got[ref], w, got)
		}
	}
}

func powerState(t *testing.T, c *vim25.Client, name string) types.VirtualMachinePowerState {
	t.Helper()
	return guestOf(t, c, name).Runtime.PowerState
}

func TestRuntimeOperations(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 3})
	c := client(t, s)
	ctx := testContext(t)

	if err := s.PowerOff(ctx, "node-0"); err != nil {
		t.Fatal(err)
	}
	if got := powerState(t, c, "node-0"); got != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("after PowerOff: %s", got)
	}
	if err := s.PowerOn(ctx, "node-0"); err != nil {
		t.Fatal(err)
	}
	if got := powerState(t, c, "node-0"); got != types.VirtualMachinePowerStatePoweredOn {
		t.Errorf("after PowerOn: %s", got)
	}
	if err := s.ShutdownGuest(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	if got := powerState(t, c, "node-1"); got != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("after ShutdownGuest: %s", got)
	}
	if err := s.ShutdownGuest(ctx, "node-1"); err == nil {
		t.Error("ShutdownGuest of a powered-off VM succeeded")
	}

	gone, _ := s.VM(ctx, "node-2")
	if err := s.Destroy(ctx, "node-2"); err != nil {
		t.Fatal(err)
	}
	ref, err := object.NewSearchIndex(c).FindByUuid(ctx, nil, gone.UUID, true, nil)
	if err != nil || ref != nil {
		t.Errorf("FindByUuid after Destroy: %v, %v", ref, err)
	}
	if _, err := s.VM(ctx, "node-2"); !errors.Is(err, vcsim.ErrNotFound) {
		t.Errorf("VM after Destroy: %v", err)
	}
	if err := s.PowerOn(ctx, "nope"); !errors.Is(err, vcsim.ErrNotFound) {
		t.Errorf("PowerOn(nope): %v", err)
	}

	vm, err := s.Create(ctx, vcsim.VMSpec{Name: "node-3"})
	if err != nil {
		t.Fatal(err)
	}
	got := guestOf(t, c, "node-3")
	if got.Guest.HostName != "node-3" || got.Guest.IpAddress != vcsim.NodeIPv4(3) || got.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || got.Config.Uuid != vm.UUID {
		t.Errorf("created VM: %+v / %+v", got.Guest, vm)
	}
	if vm.Zone != "zone-b" {
		t.Errorf("created VM zone %q, want zone-b (round-robin after node-2)", vm.Zone)
	}
	if _, err := s.Create(ctx, vcsim.VMSpec{Name: "node-3"}); err == nil {
		t.Error("Create of an existing name succeeded")
	}
	if _, err := s.Create(ctx, vcsim.VMSpec{Name: "x", Zone: "zone-q"}); err == nil || !strings.Contains(err.Error(), "Zone") {
		t.Errorf("Create in an unknown zone: %v", err)
	}
	off, err := s.Create(ctx, vcsim.VMSpec{Name: "cold", Zone: "zone-a", PoweredOff: true})
	if err != nil || off.PowerState != types.VirtualMachinePowerStatePoweredOff || off.Zone != "zone-a" {
		t.Errorf("Create powered off: %+v, %v", off, err)
	}

	g := vcsim.Guest{Hostname: "renamed", NICs: []vcsim.NIC{
		{Network: "VM Network", IPs: []string{"192.168.1.5", "fd00::5"}},
		{Network: "storage", IPs: []string{"172.16.0.5"}},
	}}
	if err := s.SetGuest(ctx, "node-0", g); err != nil {
		t.Fatal(err)
	}
	got = guestOf(t, c, "node-0")
	if got.Guest.HostName != "renamed" || got.Guest.IpAddress != "192.168.1.5" || len(got.Guest.Net) != 2 ||
		got.Guest.Net[1].Network != "storage" || !slices.Equal(got.Guest.Net[0].IpAddress, g.NICs[0].IPs) {
		t.Errorf("after SetGuest: %+v", got.Guest)
	}
	if err := s.SetGuest(ctx, "node-0", vcsim.Guest{NICs: []vcsim.NIC{{IPs: []string{"300.1.1.1"}}}}); err == nil || !strings.Contains(err.Error(), "IPs") {
		t.Errorf("SetGuest with a bad IP: %v", err)
	}
}

// TestGuestChangeReachesWatchers checks that SetGuest goes through the
// simulator's change feed, as a provider that watches instead of polling
// needs.
func TestGuestChangeReachesWatchers(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 1})
	c := client(t, s)
	ctx := testContext(t)
	vm, err := s.VM(ctx, "node-0")
	if err != nil {
		t.Fatal(err)
	}
	// The first callback carries the current value; the change must come
	// as an update after it.
	synced, changed := make(chan struct{}), make(chan error, 1)
	go func() {
		first := true
		changed <- property.Wait(ctx, property.DefaultCollector(c), vm.Ref, []string{"guest.hostName"}, func(pc []types.PropertyChange) bool {
			if first {
				first = false
				close(synced)
				return false
			}
			for _, ch := range pc {
				if ch.Val == "moved" {
					return true
				}
			}
			return false
		})
	}()
	<-synced
	if err := s.SetGuest(ctx, "node-0", vcsim.Guest{Hostname: "moved"}); err != nil {
		t.Fatal(err)
	}
	if err := <-changed; err != nil {
		t.Fatalf("waiting for the guest.hostName change: %v", err)
	}
}

func TestRequestCounting(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 1})
	ctx := testContext(t)
	if n := s.Requests().Total(); n != 0 {
		t.Errorf("requests after Start: %d (%+v), want 0: setup must not count", n, s.Requests())
	}
	c := client(t, s)
	if _, err := session.NewManager(c).UserSession(ctx); err != nil {
		t.Fatal(err)
	}
	r := s.Requests()
	if r.SOAP["RetrieveServiceContent"] != 1 || r.SOAP["Login"] != 1 {
		t.Errorf("SOAP counts after connect and login: %v", r.SOAP)
	}

	s.ResetRequests()
	bad := s.URL()
	sc := soap.NewClient(bad, true)
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := session.NewManager(vc).Login(ctx, url.UserPassword("user", "wrong")); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}
	rc := rest.NewClient(vc)
	if err := rc.Login(ctx, url.UserPassword("user", "wrong")); err == nil {
		t.Fatal("REST login with a wrong password succeeded")
	}
	r = s.Requests()
	if r.SOAP["Login"] != 1 || r.REST["POST /rest/com/vmware/cis/session"] != 1 {
		t.Errorf("failed logins: SOAP %v REST %v, want one of each", r.SOAP, r.REST)
	}

	s.ResetRequests()
	rc, err = s.RESTClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := tags.NewManager(rc)
	cats, err := m.GetCategories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ListTagsForCategory(ctx, cats[0].ID); err != nil {
		t.Fatal(err)
	}
	r = s.Requests()
	want := map[string]int{
		"POST /rest/com/vmware/cis/session":                                         1,
		"GET /rest/com/vmware/cis/tagging/category":                                 1,
		"GET /rest/com/vmware/cis/tagging/category/{id}":                            len(cats),
		"POST /rest/com/vmware/cis/tagging/tag/{id}?~action=list-tags-for-category": 1,
	}
	for k, n := range want {
		if r.REST[k] != n {
			t.Errorf("REST[%q] = %d, want %d (all: %v)", k, r.REST[k], n, r.REST)
		}
	}
	total := 0
	for _, m := range []map[string]int{r.SOAP, r.REST, r.Other} {
		for _, n := range m {
			total += n
		}
	}
	if r.Total() != total || total == 0 {
		t.Errorf("Total() = %d, sum %d", r.Total(), total)
	}
	s.ResetRequests()
	if n := s.Requests().Total(); n != 0 {
		t.Errorf("after ResetRequests: %d", n)
	}
}

func TestTLS(t *testing.T) {
	s := start(t, vcsim.Options{})
	ctx := testContext(t)
	if s.URL().Scheme != "https" {
		t.Fatalf("URL %s is not https", s.URL())
	}
	pemFile, err := os.ReadFile(s.CAFile())
	if err != nil || string(pemFile) != string(s.CACertPEM()) || !strings.HasPrefix(string(pemFile), "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("CA file %s: %q, %v", s.CAFile(), pemFile, err)
	}
	login := func(sc *soap.Client) error {
		vc, err := vim25.NewClient(ctx, sc)
		if err != nil {
			return err
		}
		return session.NewManager(vc).Login(ctx, s.Userinfo())
	}

	untrusted := soap.NewClient(s.URL(), false)
	if err := login(untrusted); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("login without the CA: %v, want a certificate error", err)
	}
	withCA := soap.NewClient(s.URL(), false)
	if err := withCA.SetRootCAs(s.CAFile()); err != nil {
		t.Fatal(err)
	}
	if err := login(withCA); err != nil {
		t.Errorf("login with the CA file: %v", err)
	}
	pinned := soap.NewClient(s.URL(), false)
	pinned.SetThumbprint(s.URL().Host, s.Thumbprint())
	if err := login(pinned); err != nil {
		t.Errorf("login with thumbprint %s: %v", s.Thumbprint(), err)
	}
	wrongPin := soap.NewClient(s.URL(), false)
	wrongPin.SetThumbprint(s.URL().Host, strings.Repeat("00:", 19)+"00")
	if err := login(wrongPin); err == nil {
		t.Error("login with a wrong thumbprint succeeded")
	}

	plain := start(t, vcsim.Options{DisableTLS: true})
	if plain.URL().Scheme != "http" || plain.CAFile() != "" || plain.Thumbprint() != "" {
		t.Errorf("DisableTLS: URL %s CA %q thumbprint %q", plain.URL(), plain.CAFile(), plain.Thumbprint())
	}
	if _, err := plain.Client(ctx); err != nil {
		t.Errorf("plain HTTP client: %v", err)
	}
}

func TestCredentials(t *testing.T) {
	s := start(t, vcsim.Options{Username: "administrator@vsphere.local", Password: "s3cret!"})
	ctx := testContext(t)
	if _, err := s.Client(ctx); err != nil {
		t.Fatalf("login with the configured credentials: %v", err)
	}
	for _, u := range []*url.Userinfo{url.UserPassword("administrator@vsphere.local", "pass"), url.UserPassword("user", "s3cret!")} {
		sc := soap.NewClient(s.URL(), false)
		if err := sc.SetRootCAs(s.CAFile()); err != nil {
			t.Fatal(err)
		}
		vc, err := vim25.NewClient(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := session.NewManager(vc).Login(ctx, u); !fault.Is(err, &types.InvalidLogin{}) {
			t.Errorf("SOAP login as %s: %v, want InvalidLogin", u.Username(), err)
		}
		if err := rest.NewClient(vc).Login(ctx, u); !rest.IsStatusError(err, http.StatusUnauthorized) {
			t.Errorf("REST login as %s: %v, want 401", u.Username(), err)
		}
	}
}

func TestStopStart(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 2})
	ctx := testContext(t)
	before, err := s.VM(ctx, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if s.Running() {
		t.Error("Running() after Stop")
	}
	if _, err := net.Dial("tcp", s.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial a stopped server: %v, want connection refused", err)
	}
	if _, err := s.Client(ctx); err == nil {
		t.Error("client of a stopped server connected")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	vm := guestOf(t, c, "node-1")
	if vm.Config.Uuid != before.UUID || vm.Guest.HostName != "node-1" {
		t.Errorf("after Start: uuid %s hostname %q, want %s node-1", vm.Config.Uuid, vm.Guest.HostName, before.UUID)
	}
}

func TestStopClosesOpenConnections(t *testing.T) {
	s := start(t, vcsim.Options{})
	c := client(t, s)
	ctx := testContext(t)
	s.Stop()
	if _, err := session.NewManager(c).UserSession(ctx); err == nil {
		t.Error("a connected client still got an answer after Stop")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// The session survives: a network outage, not a vCenter restart.
	us, err := session.NewManager(c).UserSession(ctx)
	if err != nil || us == nil {
		t.Errorf("session after Start: %v, %v", us, err)
	}
}

func TestSessionTimeout(t *testing.T) {
	s := start(t, vcsim.Options{SessionTimeout: time.Second})
	ctx := testContext(t)
	idle, err := s.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	us, err := idle.SessionManager.UserSession(ctx)
	if err != nil || us == nil {
		t.Fatalf("UserSession: %v, %v", us, err)
	}
	watcher := client(t, s)
	// The watcher's own calls keep its session alive; the idle one expires.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := methods.SessionIsActive(ctx, watcher, &types.SessionIsActive{
			This: *watcher.ServiceContent.SessionManager, SessionID: us.Key, UserName: us.UserName,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Returnval {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session did not expire")
		}
		<-tick.C
	}
	if us, err := idle.SessionManager.UserSession(ctx); err != nil || us != nil {
		t.Errorf("UserSession of the expired session: %v, %v; want nil", us, err)
	}
}

func TestFaults(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 1})
	c := client(t, s)
	ctx := testContext(t)
	vm, err := s.VM(ctx, "node-0")
	if err != nil {
		t.Fatal(err)
	}
	var mvm mo.VirtualMachine
	pc := property.DefaultCollector(c)
	s.FailMethod("RetrievePropertiesEx", &types.NotAuthenticated{}, 1)
	if err := pc.RetrieveOne(ctx, vm.Ref, []string{"name"}, &mvm); !fault.Is(err, &types.NotAuthenticated{}) {
		t.Errorf("first retrieve: %v, want NotAuthenticated", err)
	}
	if err := pc.RetrieveOne(ctx, vm.Ref, []string{"name"}, &mvm); err != nil || mvm.Name != "node-0" {
		t.Errorf("second retrieve: %v, %q", err, mvm.Name)
	}

	s.FailHTTP("RetrievePropertiesEx", http.StatusServiceUnavailable, 0)
	for range 2 {
		if err := pc.RetrieveOne(ctx, vm.Ref, []string{"name"}, &mvm); err == nil || !strings.Contains(err.Error(), "503") {
			t.Errorf("retrieve with an HTTP fault: %v, want 503", err)
		}
	}
	rc, err := s.RESTClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.FailHTTP("GET /rest/com/vmware/cis/tagging/category", http.StatusInternalServerError, 1)
	if _, err := tags.NewManager(rc).ListCategories(ctx); !rest.IsStatusError(err, http.StatusInternalServerError) {
		t.Errorf("list categories with an HTTP fault: %v, want 500", err)
	}
	if _, err := tags.NewManager(rc).ListCategories(ctx); err != nil {
		t.Errorf("list categories after the fault: %v", err)
	}
	s.ClearFaults()
	if err := pc.RetrieveOne(ctx, vm.Ref, []string{"name"}, &mvm); err != nil {
		t.Errorf("retrieve after ClearFaults: %v", err)
	}
	r := s.Requests()
	if r.SOAP["RetrievePropertiesEx"] < 5 {
		t.Errorf("failed requests are not counted: %v", r.SOAP)
	}
}

func TestLatency(t *testing.T) {
	// Only that requests still succeed: timing is not asserted.
	s := start(t, vcsim.Options{VMs: 1, Latency: 5 * time.Millisecond})
	c := client(t, s)
	if vm := guestOf(t, c, "node-0"); vm.Guest.HostName != "node-0" {
		t.Errorf("hostname %q", vm.Guest.HostName)
	}
}

// SetLatency slows every request down from then on, until set to 0.
func TestSetLatency(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 1})
	c := client(t, s)
	s.SetLatency(300 * time.Millisecond)
	begin := time.Now()
	if vm := guestOf(t, c, "node-0"); vm.Guest.HostName != "node-0" {
		t.Errorf("hostname %q", vm.Guest.HostName)
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Errorf("a request with 300ms of latency set answered after %v", took)
	}
	s.SetLatency(0)
	if vm := guestOf(t, c, "node-0"); vm.Guest.HostName != "node-0" {
		t.Errorf("after SetLatency(0): hostname %q", vm.Guest.HostName)
	}
}

func TestCloseRemovesFiles(t *testing.T) {
	ctx := testContext(t)
	s, err := vcsim.Start(ctx, vcsim.Options{VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var opts []types.BaseOptionValue
	opts, err = object.NewOptionManager(c.Client, *c.ServiceContent.Setting).Query(ctx, "vcsim.home")
	if err != nil || len(opts) != 1 {
		t.Fatalf("vcsim.home: %v, %v", opts, err)
	}
	home := opts[0].GetOptionValue().Value.(string)
	ca := s.CAFile()
	for _, p := range []string{home, ca} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("before Close: %v", err)
		}
	}
	s.Close()
	s.Close()
	if err := s.Start(); err == nil {
		t.Error("Start after Close succeeded")
	}
	for _, p := range []string{home, ca} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Close, %s: %v", p, err)
		}
	}
}

func TestCloudConfig(t *testing.T) {
	s := start(t, vcsim.Options{Password: "p w: \"x\""})
	host, port, _ := net.SplitHostPort(s.Addr())
	for trust, want := range map[vcsim.Trust]map[string]any{
		vcsim.TrustCAFile:     {"caFile": s.CAFile()},
		vcsim.TrustThumbprint: {"thumbprint": s.Thumbprint()},
	} {
		var got struct {
			Global map[string]any    `json:"global"`
			Labels map[string]string `json:"labels"`
		}
		if err := yaml.Unmarshal(s.CloudConfig(trust), &got); err != nil {
			t.Fatalf("%s", err)
		}
		want["server"], want["port"], want["user"], want["password"] = host, mustAtoi(t, port), "user", "p w: \"x\""
		want["datacenters"] = []any{"DC0"}
		if !reflect.DeepEqual(got.Global, want) {
			t.Errorf("global = %v, want %v", got.Global, want)
		}
		if got.Labels["zone"] != "k8s-zone" || got.Labels["region"] != "k8s-region" {
			t.Errorf("labels = %v", got.Labels)
		}
	}
}

func mustAtoi(t *testing.T, s string) float64 {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return float64(n)
}

func TestRemote(t *testing.T) {
	s := start(t, vcsim.Options{VMs: 2, Control: true})
	ctx := testContext(t)
	c := client(t, s)
	server := "https://" + s.Addr()
	for _, trust := range []vcsim.RemoteOptions{{CAFile: s.CAFile()}, {Thumbprint: s.Thumbprint()}} {
		trust.Server, trust.Username, trust.Password = server, "user", "pass"
		r, err := vcsim.NewRemote(trust)
		if err != nil {
			t.Fatal(err)
		}
		if vms, err := r.VMs(ctx); err != nil || len(vms) < 2 {
			t.Errorf("VMs with %+v: %v, %v", trust, vms, err)
		}
	}
	r, err := vcsim.NewRemote(vcsim.RemoteOptions{Server: server, Username: "user", Password: "pass", CAFile: s.CAFile()})
	if err != nil {
		t.Fatal(err)
	}
	if vm, err := r.PowerOff(ctx, "node-0"); err != nil || vm.PowerState != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("PowerOff: %+v, %v", vm, err)
	}
	if got := powerState(t, c, "node-0"); got != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("after remote PowerOff: %s", got)
	}
	if vm, err := r.PowerOn(ctx, "node-0"); err != nil || vm.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Errorf("PowerOn: %+v, %v", vm, err)
	}
	if vm, err := r.ShutdownGuest(ctx, "node-0"); err != nil || vm.PowerState != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("ShutdownGuest: %+v, %v", vm, err)
	}
	vm, err := r.Create(ctx, vcsim.VMSpec{Name: "extra", Zone: "zone-b"})
	if err != nil || vm.Zone != "zone-b" || vm.Guest.Hostname != "extra" {
		t.Errorf("Create: %+v, %v", vm, err)
	}
	if got := guestOf(t, c, "extra"); got.Guest.IpAddress != vcsim.NodeIPv4(2) {
		t.Errorf("created VM ip %q, want %s", got.Guest.IpAddress, vcsim.NodeIPv4(2))
	}
	s.ResetRequests()
	if vm, err := r.SetGuest(ctx, "extra", vcsim.Guest{Hostname: "h", NICs: []vcsim.NIC{{Network: "VM Network", IPs: []string{"10.9.9.9"}}}}); err != nil || vm.Guest.NICs[0].IPs[0] != "10.9.9.9" {
		t.Errorf("SetGuest: %+v, %v", vm, err)
	}
	if err := r.Destroy(ctx, "extra"); err != nil {
		t.Errorf("Destroy: %v", err)
	}
	if _, err := r.VM(ctx, "extra"); !errors.Is(err, vcsim.ErrNotFound) {
		t.Errorf("VM after Destroy: %v, want ErrNotFound", err)
	}
	if _, err := r.Create(ctx, vcsim.VMSpec{Name: "y", Zone: "nowhere"}); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "Zone") {
		t.Errorf("Create in a bad zone: %v, want 400 naming Zone", err)
	}
	if n := s.Requests().Total(); n != 0 {
		t.Errorf("control requests were counted: %+v", s.Requests())
	}
	guestOf(t, c, "node-1")
	req, err := r.Requests(ctx, true)
	if err != nil || req.SOAP["RetrievePropertiesEx"] == 0 {
		t.Errorf("Requests: %+v, %v", req, err)
	}
	if n := s.Requests().Total(); n != 0 {
		t.Errorf("after Requests(reset): %d", n)
	}
	bad, err := vcsim.NewRemote(vcsim.RemoteOptions{Server: server, Username: "user", Password: "nope", CAFile: s.CAFile()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.VMs(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong password: %v, want 401", err)
	}
	pinned, err := vcsim.NewRemote(vcsim.RemoteOptions{Server: server, Username: "user", Password: "pass", Thumbprint: strings.Repeat("AA:", 19) + "AA"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pinned.VMs(ctx); err == nil || !strings.Contains(err.Error(), "thumbprint") {
		t.Errorf("wrong thumbprint: %v", err)
	}

	// Without Options.Control the path is the simulator's (unknown: 404).
	plain := start(t, vcsim.Options{})
	pr, err := vcsim.NewRemote(vcsim.RemoteOptions{Server: "https://" + plain.Addr(), Username: "user", Password: "pass", CAFile: plain.CAFile()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.VMs(ctx); err == nil {
		t.Error("control API served without Options.Control")
	}
}

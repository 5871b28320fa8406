package openstack_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/providers/openstack"
)

// clock is the dialect's clock, moved by the test for token expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// cloudConf is a cloud.conf for mc, as an operator would write it for the
// upstream provider.
func cloudConf(mc *minicloudtest.Cloud, extra string) string {
	return fmt.Sprintf(`[Global]
auth-url = %s
username = ccm
password = %s
user-domain-name = %s
tenant-name = %s
domain-name = %s
region = %s
%s`, mc.IdentityURL, mc.Token, mos.DomainName, mos.ProjectName, mos.DomainName, minicloud.Region, extra)
}

func newProvider(t *testing.T, conf string) *openstack.Cloud {
	t.Helper()
	cfg, err := openstack.ParseConfig(strings.NewReader(conf))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	c, err := openstack.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

type env struct {
	mc  *minicloudtest.Cloud
	clk *clock
	p   *openstack.Cloud
}

func start(t *testing.T, o mos.Options) *env {
	t.Helper()
	clk := &clock{t: time.Now()}
	o.Now = clk.now
	mc := minicloudtest.Start(t, minicloudtest.Options{OpenStack: &o})
	return &env{mc: mc, clk: clk, p: newProvider(t, cloudConf(mc, ""))}
}

func (e *env) create(t *testing.T, name, typ, zone string, public bool) *api.Instance {
	t.Helper()
	in, err := e.mc.Client.CreateInstance(context.Background(), api.InstanceCreate{Name: name, Type: typ, Zone: zone, PublicIP: public})
	if err != nil {
		t.Fatalf("create instance %s: %v", name, err)
	}
	return in
}

func (e *env) requests(t *testing.T, op string) int {
	t.Helper()
	st, err := e.mc.Client.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Requests[op])
}

const listOp = "GET /compute/v2.1/servers/detail"

// wantMetadata is what the provider must report for an instance.
func wantMetadata(in *api.Instance) cloudprovider.InstanceMetadata {
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: in.PrivateIP}}
	if in.PublicIP != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: in.PublicIP})
	}
	return cloudprovider.InstanceMetadata{ProviderID: "openstack:///" + in.ID, InstanceType: in.Type,
		NodeAddresses: addrs, Zone: in.Zone, Region: minicloud.Region}
}

func sameMetadata(a, b cloudprovider.InstanceMetadata) bool {
	return a.ProviderID == b.ProviderID && a.InstanceType == b.InstanceType && a.Zone == b.Zone &&
		a.Region == b.Region && slices.Equal(a.NodeAddresses, b.NodeAddresses)
}

// TestListInstances: every server in one paged listing (page size 2 forces
// three pages for five servers), with upstream's provider IDs, the
// flavor's name, the zone and the addresses.
func TestListInstances(t *testing.T) {
	e := start(t, mos.Options{MaxPageSize: 2})
	ctx := context.Background()
	want := map[string]*api.Instance{}
	for i := range 5 {
		in := e.create(t, fmt.Sprintf("node-%d", i), []string{"mc.small", "mc.medium"}[i%2], minicloud.Zones[i%3], i == 0)
		want[in.Name] = in
	}
	if err := e.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.ListInstances(ctx)
	if err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d instances, want %d: %+v", len(got), len(want), got)
	}
	for _, g := range got {
		w := want[g.Name]
		if w == nil {
			t.Errorf("unexpected instance %q", g.Name)
			continue
		}
		if !sameMetadata(g.Metadata, wantMetadata(w)) || g.Shutdown {
			t.Errorf("instance %s: got %+v shutdown=%v, want %+v", g.Name, g.Metadata, g.Shutdown, wantMetadata(w))
		}
	}
	if n := e.requests(t, listOp); n != 3 {
		t.Errorf("%s called %d times for 5 servers in pages of 2, want 3", listOp, n)
	}

	// The same through InstancesV2, by provider ID (both forms) and by name.
	w := want["node-0"]
	for _, node := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1.NodeSpec{ProviderID: "openstack:///" + w.ID}},
		{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1.NodeSpec{ProviderID: "openstack://" + minicloud.Region + "/" + w.ID}},
	} {
		m, err := e.p.InstanceMetadata(ctx, node)
		if err != nil || !sameMetadata(*m, wantMetadata(w)) {
			t.Errorf("InstanceMetadata(%s %q) = %+v, %v; want %+v", node.Name, node.Spec.ProviderID, m, err, wantMetadata(w))
		}
	}
}

// TestShutdownAndDeletion: a stopped server is shut down; a deleted one is
// missing from the listing and does not exist.
func TestShutdownAndDeletion(t *testing.T) {
	e := start(t, mos.Options{})
	ctx := context.Background()
	a := e.create(t, "a", "mc.small", minicloud.Zones[0], false)
	b := e.create(t, "b", "mc.small", minicloud.Zones[1], false)
	if _, err := e.mc.Client.StopInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.mc.Client.DeleteInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "a" || !got[0].Shutdown {
		t.Errorf("listing = %+v, want only a, shut down", got)
	}
	nodeA := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: openstack.ProviderID(a.ID)}}
	if down, err := e.p.InstanceShutdown(ctx, nodeA); err != nil || !down {
		t.Errorf("InstanceShutdown(a) = %v, %v; want true", down, err)
	}
	for _, node := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1.NodeSpec{ProviderID: openstack.ProviderID(b.ID)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	} {
		if ok, err := e.p.InstanceExists(ctx, node); err != nil || ok {
			t.Errorf("InstanceExists(b %q) = %v, %v; want false", node.Spec.ProviderID, ok, err)
		}
		if down, err := e.p.InstanceShutdown(ctx, node); err != nil || down {
			t.Errorf("InstanceShutdown(b %q) = %v, %v; want false, nil (gone is not shut down)", node.Spec.ProviderID, down, err)
		}
		if _, err := e.p.InstanceMetadata(ctx, node); !errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Errorf("InstanceMetadata(b %q): %v, want InstanceNotFound", node.Spec.ProviderID, err)
		}
	}
}

// TestTokenExpiry: an expired Keystone token is renewed (gophercloud
// re-authenticates on 401) and the listing succeeds.
func TestTokenExpiry(t *testing.T) {
	e := start(t, mos.Options{TokenTTL: time.Minute})
	ctx := context.Background()
	e.create(t, "a", "mc.small", minicloud.Zones[0], false)
	if _, err := e.p.ListInstances(ctx); err != nil {
		t.Fatal(err)
	}
	e.clk.advance(2 * time.Minute)
	if err := e.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.ListInstances(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("listing after token expiry = %+v, %v", got, err)
	}
	if n := e.requests(t, "POST /identity/v3/auth/tokens"); n != 1 {
		t.Errorf("authentications after expiry = %d, want 1", n)
	}
}

// TestFaults: errors and throttling of the cloud are Transient and
// Throttled, never "gone".
func TestFaults(t *testing.T) {
	e := start(t, mos.Options{})
	ctx := context.Background()
	a := e.create(t, "a", "mc.small", minicloud.Zones[0], false)
	byID := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: openstack.ProviderID(a.ID)}}
	byName := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if _, err := e.p.ListInstances(ctx); err != nil { // authenticate before the faults
		t.Fatal(err)
	}
	ops := []string{listOp, "GET /compute/v2.1/servers/{id}"}
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: ops}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.p.ListInstances(ctx); !stratus.IsTransient(err) || got != nil {
		t.Errorf("ListInstances with 500s = %v, %v; want a transient error", got, err)
	}
	for _, n := range []*v1.Node{byID, byName} {
		if ok, err := e.p.InstanceExists(ctx, n); !stratus.IsTransient(err) || ok {
			t.Errorf("InstanceExists(%q) with 500s = %v, %v; want a transient error", n.Spec.ProviderID, ok, err)
		}
	}
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{ThrottleRate: 1, Operations: ops}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*v1.Node{byID, byName} {
		_, err := e.p.InstanceMetadata(ctx, n)
		var te *stratus.ThrottledError
		if !errors.As(err, &te) || te.RetryAfter <= 0 || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Errorf("InstanceMetadata(%q) throttled: %v; want a ThrottledError with RetryAfter", n.Spec.ProviderID, err)
		}
	}
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.p.InstanceExists(ctx, byID); err != nil || !ok {
		t.Errorf("InstanceExists after the faults = %v, %v", ok, err)
	}
}

// TestUnreachable: no answer from Keystone is a transient error.
func TestUnreachable(t *testing.T) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testsupport.FreePort(t)))
	p := newProvider(t, "[Global]\nauth-url = http://"+addr+"/v3\nusername = u\npassword = p\ndomain-name = Default\ntenant-name = x\n")
	if _, err := p.ListInstances(context.Background()); !stratus.IsTransient(err) {
		t.Errorf("ListInstances with Keystone down: %v, want a transient error", err)
	}
}

// TestRefusedCredentials: a password Keystone refuses is an error that is
// not retried as transient and does not show the password.
func TestRefusedCredentials(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{OpenStack: &mos.Options{}})
	conf := strings.Replace(cloudConf(mc, ""), "password = "+mc.Token, "password = wrong-s3cret", 1)
	p := newProvider(t, conf)
	_, err := p.ListInstances(context.Background())
	if err == nil || stratus.IsTransient(err) || strings.Contains(err.Error(), "wrong-s3cret") {
		t.Errorf("ListInstances with a refused password: %v; want a non-transient error without the password", err)
	}
	// Keystone's 401 never says a server is gone.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: openstack.ProviderID("0b2e7f5c-0000-4000-8000-000000000001")}}
	if ok, err := p.InstanceExists(context.Background(), node); err == nil {
		t.Errorf("InstanceExists with a refused password = %v, nil; want an error", ok)
	}
	if _, err := p.InstanceMetadata(context.Background(), node); err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("InstanceMetadata with a refused password: %v; want an error, not InstanceNotFound", err)
	}
}

// TestKeystoneDown: when the token has expired and Keystone answers 500,
// every lookup is a transient error, never "gone"; once Keystone is back,
// the provider authenticates again and the server exists.
func TestKeystoneDown(t *testing.T) {
	e := start(t, mos.Options{TokenTTL: time.Minute})
	ctx := context.Background()
	a := e.create(t, "a", "mc.small", minicloud.Zones[0], false)
	byID := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: openstack.ProviderID(a.ID)}}
	byName := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if _, err := e.p.ListInstances(ctx); err != nil {
		t.Fatal(err)
	}
	e.clk.advance(2 * time.Minute)
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: []string{"POST /identity/v3/auth/tokens"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.p.ListInstances(ctx); !stratus.IsTransient(err) || got != nil {
		t.Errorf("ListInstances with Keystone down: %v, %v; want a transient error", got, err)
	}
	for _, n := range []*v1.Node{byID, byName} {
		if ok, err := e.p.InstanceExists(ctx, n); !stratus.IsTransient(err) || ok {
			t.Errorf("InstanceExists(%q) with Keystone down = %v, %v; want a transient error", n.Spec.ProviderID, ok, err)
		}
		if _, err := e.p.InstanceShutdown(ctx, n); !stratus.IsTransient(err) || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Errorf("InstanceShutdown(%q) with Keystone down: %v; want a transient error", n.Spec.ProviderID, err)
		}
	}
	// A fresh provider whose first authentication gets a 500.
	if _, err := newProvider(t, cloudConf(e.mc, "")).ListInstances(ctx); !stratus.IsTransient(err) {
		t.Errorf("first authentication with Keystone down: %v; want a transient error", err)
	}
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.p.InstanceExists(ctx, byID); err != nil || !ok {
		t.Errorf("InstanceExists once Keystone is back = %v, %v", ok, err)
	}
}

package minicloud

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// TestIPv6AddressesAreReleased shrinks the IPv6 pool to two addresses to
// show that a deleted instance's IPv6 address is free again and that
// IPv4-only instances take none.
func TestIPv6AddressesAreReleased(t *testing.T) {
	saved := instanceIPv6CIDR
	instanceIPv6CIDR = netip.MustParsePrefix("fd00:10::/126") // ::1 and ::2
	t.Cleanup(func() { instanceIPv6CIDR = saved })

	cfg := DefaultConfig()
	cfg.StateDir, cfg.Tokens = t.TempDir(), []string{"t"}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(name string, ipv6 bool) (*api.Instance, error) {
		return c.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-a", IPv6: ipv6})
	}
	v4, err := create("v4-only", false)
	if err != nil || v4.PrivateIPv6 != "" {
		t.Fatalf("IPv4-only instance: %+v, %v", v4, err)
	}
	a, err := create("a", true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := create("b", true)
	if err != nil {
		t.Fatal(err)
	}
	if a.PrivateIPv6 == b.PrivateIPv6 || !instanceIPv6CIDR.Contains(netip.MustParseAddr(a.PrivateIPv6)) || !instanceIPv6CIDR.Contains(netip.MustParseAddr(b.PrivateIPv6)) {
		t.Fatalf("IPv6 addresses %q and %q: want two distinct ones of %s", a.PrivateIPv6, b.PrivateIPv6, instanceIPv6CIDR)
	}
	if _, err := create("c", true); !client.IsConflict(err) {
		t.Fatalf("third dual-stack instance in a pool of two: %v, want conflict (exhausted)", err)
	}
	if err := c.DeleteInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	got, err := create("c", true)
	if err != nil {
		t.Fatalf("after deleting %s: %v", a.Name, err)
	}
	if got.PrivateIPv6 != a.PrivateIPv6 {
		t.Errorf("IPv6 address %q, want the released %q", got.PrivateIPv6, a.PrivateIPv6)
	}
}

package devenv

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CoreDNS image's tag names the version hack/kubebins builds.
func TestCoreDNSVersionIsPinned(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "kubebins", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	var pinned string
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "COREDNS_VERSION="); ok {
			pinned = v
		}
	}
	if pinned != coreDNSVersion {
		t.Errorf("versions.env pins CoreDNS %q, the image is tagged %q", pinned, CoreDNSImage)
	}
}

// The cluster DNS address is in the Service network, and the real nodes'
// VIPs are routable addresses of the environment's own, outside every other
// range of its network and outside loopback (a pod's loopback is its own).
func TestRealNetRanges(t *testing.T) {
	if !netip.MustParsePrefix(ServiceCIDR).Contains(netip.MustParseAddr(ClusterDNS)) {
		t.Errorf("cluster DNS %s is not in the Service network %s", ClusterDNS, ServiceCIDR)
	}
	for _, block := range []int{1, 190, 244, 246, 254} {
		n, err := newRealNet(block)
		if err != nil {
			t.Fatal(err)
		}
		if n.vipNet.Addr().IsLoopback() {
			t.Errorf("block %d: VIPs %s on loopback", block, n.vipNet)
		}
		link := netip.PrefixFrom(n.hostIP, 30).Masked()
		for name, p := range map[string]netip.Prefix{"host link": link, "node network": n.nodeNet, "pod network": n.podNet, "Service network": netip.MustParsePrefix(ServiceCIDR)} {
			if p.Overlaps(n.vipNet) {
				t.Errorf("block %d: VIPs %s overlap the %s %s", block, n.vipNet, name, p)
			}
		}
		if n.vipNet.Bits() > 30 {
			t.Errorf("block %d: VIP pool %s too small", block, n.vipNet)
		}
	}
}

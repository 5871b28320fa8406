package node

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ProvidedNodeIPAnnotation is set by kubelet from --node-ip when it runs with an
// external cloud provider: one IP, or a dual-stack pair separated by a comma.
const ProvidedNodeIPAnnotation = "alpha.kubernetes.io/provided-node-ip"

// ErrProvidedNodeIP is wrapped by the errors about the provided-node-ip annotation:
// unparsable, or naming an IP the cloud does not report for the node.
var ErrProvidedNodeIP = errors.New("invalid " + ProvidedNodeIPAnnotation)

// parseProvidedNodeIP parses the provided-node-ip annotation: one IP, or two IPs of
// different families separated by a comma, where neither of the two may be
// unspecified (0.0.0.0 or ::).
func parseProvidedNodeIP(value string) ([]netip.Addr, error) {
	parts := strings.Split(value, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w %q: at most two IPs (a dual-stack pair) are allowed", ErrProvidedNodeIP, value)
	}
	ips := make([]netip.Addr, 0, len(parts))
	for _, part := range parts {
		ip, err := netip.ParseAddr(strings.TrimSpace(part))
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%w %q: %q is not an IP address", ErrProvidedNodeIP, value, part)
		}
		ips = append(ips, ip.Unmap())
	}
	if len(ips) == 2 {
		if ips[0].Is4() == ips[1].Is4() {
			return nil, fmt.Errorf("%w %q: two IPs must be a dual-stack pair (one IPv4, one IPv6)", ErrProvidedNodeIP, value)
		}
		if ips[0].IsUnspecified() || ips[1].IsUnspecified() {
			return nil, fmt.Errorf("%w %q: a dual-stack pair must not contain an unspecified address", ErrProvidedNodeIP, value)
		}
	}
	return ips, nil
}

// DesiredAddresses computes the addresses node should carry given the addresses the
// cloud reports for it, following upstream's merge rules: an empty cloud list keeps
// the node's addresses (ok is false); the node's Hostname addresses are kept when
// the cloud reports none; and the provided-node-ip annotation selects and orders
// the addresses of the types it matches. ok is false too when the result equals
// the node's current list, compared exactly and in order (upstream's per-type
// comparison misses reorderings and reports unchanged lists as changed).
func DesiredAddresses(node *v1.Node, cloudAddrs []v1.NodeAddress) (addrs []v1.NodeAddress, ok bool, err error) {
	if len(cloudAddrs) == 0 {
		return nil, false, nil
	}
	addrs = slices.Clone(cloudAddrs)
	if !slices.ContainsFunc(addrs, isHostname) {
		for _, a := range node.Status.Addresses {
			if isHostname(a) {
				addrs = append(addrs, a)
			}
		}
	}
	if value, set := node.Annotations[ProvidedNodeIPAnnotation]; set {
		ips, err := parseProvidedNodeIP(value)
		if err != nil {
			return nil, false, err
		}
		if addrs, err = selectProvidedIPs(addrs, ips); err != nil {
			return nil, false, err
		}
	}
	if slices.Equal(addrs, node.Status.Addresses) {
		return nil, false, nil
	}
	return addrs, true, nil
}

func isHostname(a v1.NodeAddress) bool { return a.Type == v1.NodeHostName }

// selectProvidedIPs puts, for each provided IP in order, the addresses equal to it
// first (in the cloud's order and text), then every other address whose type none
// of them had. A provided IP the cloud does not report is an error.
func selectProvidedIPs(addrs []v1.NodeAddress, ips []netip.Addr) ([]v1.NodeAddress, error) {
	out := make([]v1.NodeAddress, 0, len(addrs))
	enforced := map[v1.NodeAddressType]bool{}
	for _, ip := range ips {
		matched := false
		for _, a := range addrs {
			if parsed, err := netip.ParseAddr(a.Address); err == nil && parsed.Unmap() == ip {
				out = append(out, a)
				enforced[a.Type] = true
				matched = true
			}
		}
		if !matched {
			return nil, fmt.Errorf("%w: %s is not among the node's addresses in the cloud %v", ErrProvidedNodeIP, ip, addrs)
		}
	}
	for _, a := range addrs {
		if !enforced[a.Type] {
			out = append(out, a)
		}
	}
	return out, nil
}

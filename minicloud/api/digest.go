package api

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// TargetsDigest is the digest of what a load balancer sends traffic to: its
// targets, its listeners' own targets and the backend pools it names,
// whatever their order. Listings and GET answers carry it in
// LoadBalancer.TargetsDigest (the summary view too, which leaves the targets
// out), so that a client can tell whether a load balancer targets what it
// would send without reading thousands of targets: equal digests mean equal
// targets, listener targets and pools.
func TargetsDigest(targets []Target, listeners []Listener, pools []string) string {
	lines := make([]string, 0, len(targets)+len(pools))
	for _, t := range targets {
		lines = append(lines, "t "+targetKey(t))
	}
	for _, ln := range listeners {
		prefix := "l " + ln.Protocol + "/" + strconv.Itoa(ln.Port) + " "
		for _, t := range ln.Targets {
			lines = append(lines, prefix+targetKey(t))
		}
	}
	for _, p := range pools {
		lines = append(lines, "p "+p)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// targetKey names a target in a digest: an instance or an address.
func targetKey(t Target) string {
	if t.InstanceID != "" {
		return "i:" + t.InstanceID
	}
	return "a:" + t.IP
}

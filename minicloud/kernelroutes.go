package minicloud

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// KernelRoutes makes minicloud's routes carry packets: every route it holds
// whose target instance runs is programmed as a kernel route (destination
// via the instance's private IP) in the routing table of a network
// namespace, the router of a network whose machines are real (network
// namespaces on a bridge, as `stratus dev --real-nodes` builds). A route
// deleted from minicloud, or whose instance stops, leaves the kernel too, so
// cross-node pod traffic flows exactly while the cloud holds the route.
type KernelRoutes struct {
	// Netns is the named network namespace (ip netns) whose main table
	// gets the routes.
	Netns string
	// Period is how often the table is compared with the stored routes
	// (default 1s); every route write also triggers a comparison.
	Period time.Duration
}

// kernelRouteProto marks the kernel routes minicloud owns (iproute2's
// "proto" of a route, a number no routing daemon uses), so that a sync
// removes only its own.
const kernelRouteProto = "201"

// runKernelRoutes keeps the namespace's table equal to the stored routes
// until ctx is done. Errors are logged and retried at the next period: a
// table briefly out of date is what a real cloud's route propagation does.
func (s *Server) runKernelRoutes(ctx context.Context, kr KernelRoutes) {
	period := kr.Period
	if period <= 0 {
		period = time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := s.syncKernelRoutes(ctx, kr.Netns); err != nil && ctx.Err() == nil {
			s.log.Error(err, "kernel routes out of date", "netns", kr.Netns)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.routesChanged:
		}
	}
}

// notifyRoutes wakes the kernel-route sync, if any, after a route or
// instance change.
func (s *Server) notifyRoutes() {
	select {
	case s.routesChanged <- struct{}{}:
	default:
	}
}

// desiredKernelRoutes returns destination → next hop for every route whose
// target instance runs and has an IPv4 or IPv6 private address of the
// destination's family.
func (s *Server) desiredKernelRoutes() (map[string]string, error) {
	want := map[string]string{}
	err := s.store.View(func(tx *store.Tx) error {
		routes, _, err := store.List[api.Route](tx, store.Routes, "", 0, nil)
		if err != nil {
			return err
		}
		for _, rt := range routes {
			in, err := store.Get[api.Instance](tx, store.Instances, rt.TargetInstanceID)
			if err != nil || in.State != api.InstanceRunning {
				continue // blackhole: no kernel route
			}
			dst, err := netip.ParsePrefix(rt.DestinationCIDR)
			if err != nil {
				continue
			}
			via := in.PrivateIP
			if dst.Addr().Is6() {
				via = in.PrivateIPv6
			}
			if via != "" {
				want[dst.Masked().String()] = via
			}
		}
		return nil
	})
	return want, err
}

// syncKernelRoutes makes the namespace's minicloud routes equal to the
// desired ones.
func (s *Server) syncKernelRoutes(ctx context.Context, netns string) error {
	want, err := s.desiredKernelRoutes()
	if err != nil {
		return fmt.Errorf("read routes: %w", err)
	}
	have := map[string]string{}
	for _, family := range []string{"-4", "-6"} {
		out, err := ipCommand(ctx, netns, family, "-j", "route", "show", "proto", kernelRouteProto)
		if err != nil {
			return err
		}
		var rows []struct {
			Dst     string `json:"dst"`
			Gateway string `json:"gateway"`
		}
		if len(bytes.TrimSpace(out)) > 0 {
			if err := json.Unmarshal(out, &rows); err != nil {
				return fmt.Errorf("ip route show in %s: %w", netns, err)
			}
		}
		for _, r := range rows {
			if p, err := netip.ParsePrefix(r.Dst); err == nil {
				have[p.String()] = r.Gateway
			} else if a, err := netip.ParseAddr(r.Dst); err == nil {
				have[netip.PrefixFrom(a, a.BitLen()).String()] = r.Gateway
			}
		}
	}
	var dsts []string
	for dst := range want {
		dsts = append(dsts, dst)
	}
	sort.Strings(dsts)
	for _, dst := range dsts {
		if have[dst] == want[dst] {
			continue
		}
		if _, err := ipCommand(ctx, netns, "route", "replace", dst, "via", want[dst], "proto", kernelRouteProto); err != nil {
			return err
		}
		s.log.V(1).Info("kernel route programmed", "netns", netns, "destination", dst, "via", want[dst])
	}
	for dst := range have {
		if _, ok := want[dst]; ok {
			continue
		}
		if _, err := ipCommand(ctx, netns, "route", "del", dst, "proto", kernelRouteProto); err != nil {
			return err
		}
		s.log.V(1).Info("kernel route removed", "netns", netns, "destination", dst)
	}
	return nil
}

// ipCommand runs iproute2's ip in a named network namespace.
func ipCommand(ctx context.Context, netns string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"-n", netns}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ip -n %s %v: %w: %s", netns, args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

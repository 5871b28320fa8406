package minicloudcmd

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// parseListener parses PROTOCOL:PORT:TARGET_PORT, e.g. "TCP:80:30080";
// the protocol is case-insensitive and TARGET_PORT defaults to PORT.
func parseListener(s string) (api.Listener, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return api.Listener{}, fmt.Errorf("listener %q: want PROTOCOL:PORT[:TARGET_PORT]", s)
	}
	l := api.Listener{Protocol: strings.ToUpper(parts[0])}
	if l.Protocol != api.ProtocolTCP && l.Protocol != api.ProtocolUDP {
		return api.Listener{}, fmt.Errorf("listener %q: protocol must be TCP or UDP", s)
	}
	var err error
	if l.Port, err = parsePort(parts[1]); err != nil {
		return api.Listener{}, fmt.Errorf("listener %q: %w", s, err)
	}
	l.TargetPort = l.Port
	if len(parts) == 3 {
		if l.TargetPort, err = parsePort(parts[2]); err != nil {
			return api.Listener{}, fmt.Errorf("listener %q: %w", s, err)
		}
	}
	return l, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q: want 1-65535", s)
	}
	return p, nil
}

// parseTarget parses an instance ID ("i-...") or an IP address.
func parseTarget(s string) (api.Target, error) {
	if strings.HasPrefix(s, "i-") {
		return api.Target{InstanceID: s}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return api.Target{}, fmt.Errorf("target %q: want an instance ID (i-...) or an IP address", s)
	}
	return api.Target{IP: a.String()}, nil
}

// parseHealthCheck parses PROTOCOL[:PORT[:PATH]], e.g. "HTTP:10256:/healthz"
// or "TCP"; an empty string means no health check.
func parseHealthCheck(s string, interval int) (*api.HealthCheck, error) {
	if s == "" {
		if interval != 0 {
			return nil, fmt.Errorf("a health check interval needs --health-check")
		}
		return nil, nil
	}
	parts := strings.SplitN(s, ":", 3)
	hc := &api.HealthCheck{Protocol: strings.ToUpper(parts[0]), IntervalSeconds: interval}
	if hc.Protocol != api.ProtocolTCP && hc.Protocol != api.ProtocolHTTP {
		return nil, fmt.Errorf("health check %q: protocol must be TCP or HTTP", s)
	}
	if len(parts) > 1 && parts[1] != "" {
		var err error
		if hc.Port, err = parsePort(parts[1]); err != nil {
			return nil, fmt.Errorf("health check %q: %w", s, err)
		}
	}
	if len(parts) > 2 {
		if hc.Protocol != api.ProtocolHTTP || !strings.HasPrefix(parts[2], "/") {
			return nil, fmt.Errorf("health check %q: a path needs HTTP and must start with '/'", s)
		}
		hc.Path = parts[2]
	}
	return hc, nil
}

// parseTags parses KEY=VALUE pairs; for filters, a bare KEY matches any value.
func parseTags(pairs []string, allowBare bool) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	tags := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if k == "" || (!ok && !allowBare) {
			return nil, fmt.Errorf("tag %q: want KEY=VALUE", p)
		}
		tags[k] = v
	}
	return tags, nil
}

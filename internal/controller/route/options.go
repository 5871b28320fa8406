package route

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// Defaults of the Options fields.
const (
	DefaultReconciliationPeriod = 10 * time.Second
	DefaultResyncPeriod         = 5 * time.Minute
	DefaultMaxConcurrentOps     = 200
	DefaultMaxRetryBackoff      = 5 * time.Minute
)

// ErrNoClusterCIDR is returned by Add when the routes provider supports routes but
// no cluster CIDR is configured.
var ErrNoClusterCIDR = errors.New("--cluster-cidr is required when the routes provider supports routes (or set --configure-cloud-routes=false)")

// Options configures the route controller. Zero values take the defaults.
type Options struct {
	// ClusterName is --cluster-name (default "kubernetes"): the cluster whose routes
	// are listed, created and deleted.
	ClusterName string
	// ClusterCIDRs is --cluster-cidr, parsed by ParseClusterCIDRs: one CIDR, or one
	// IPv4 and one IPv6 CIDR. Only routes inside them are ever deleted. Required when
	// the routes provider supports routes.
	ClusterCIDRs []netip.Prefix
	// ReconciliationPeriod is --route-reconciliation-period (default 10s): at most one
	// reconcile starts per period, however many nodes change.
	ReconciliationPeriod time.Duration
	// ResyncPeriod is how often a full reconcile runs when no node change triggered
	// one, to repair drift in the cloud (default 5m; no upstream flag).
	ResyncPeriod time.Duration
	// MaxConcurrentOps caps the route creations and deletions in flight (default 200,
	// upstream's fixed value; no upstream flag).
	MaxConcurrentOps int
	// MaxRetryBackoff caps the exponential backoff after a failed reconcile, which
	// starts at ReconciliationPeriod (default 5m; no upstream flag).
	MaxRetryBackoff time.Duration
}

// withDefaults validates o and returns it with zero values replaced by defaults.
func (o Options) withDefaults() (Options, error) {
	if o.ClusterName == "" {
		o.ClusterName = cloud.DefaultClusterName
	}
	for _, d := range []struct {
		flag  string
		value *time.Duration
		def   time.Duration
	}{
		{"--route-reconciliation-period", &o.ReconciliationPeriod, DefaultReconciliationPeriod},
		{"route ResyncPeriod", &o.ResyncPeriod, DefaultResyncPeriod},
		{"route MaxRetryBackoff", &o.MaxRetryBackoff, DefaultMaxRetryBackoff},
	} {
		if *d.value < 0 {
			return o, fmt.Errorf("%s must not be negative, got %s", d.flag, *d.value)
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	if o.MaxConcurrentOps < 0 {
		return o, fmt.Errorf("route MaxConcurrentOps must not be negative, got %d", o.MaxConcurrentOps)
	}
	if o.MaxConcurrentOps == 0 {
		o.MaxConcurrentOps = DefaultMaxConcurrentOps
	}
	if o.MaxRetryBackoff < o.ReconciliationPeriod {
		o.MaxRetryBackoff = o.ReconciliationPeriod
	}
	if len(o.ClusterCIDRs) > 0 {
		if err := validateClusterCIDRs(o.ClusterCIDRs); err != nil {
			return o, err
		}
	}
	return o, nil
}

// ParseClusterCIDRs parses the value of --cluster-cidr: one CIDR, or a dual-stack
// pair (one IPv4 and one IPv6 CIDR) separated by a comma. Host bits are cleared
// ("10.244.1.0/16" is 10.244.0.0/16). Errors name the flag.
func ParseClusterCIDRs(flagValue string) ([]netip.Prefix, error) {
	if strings.TrimSpace(flagValue) == "" {
		return nil, errors.New("--cluster-cidr is empty")
	}
	parts := strings.Split(flagValue, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("--cluster-cidr %q: at most two CIDRs (a dual-stack pair) are allowed, got %d", flagValue, len(parts))
	}
	cidrs := make([]netip.Prefix, 0, len(parts))
	for _, part := range parts {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %q: %w", flagValue, err)
		}
		cidrs = append(cidrs, p.Masked())
	}
	if err := validateClusterCIDRs(cidrs); err != nil {
		return nil, err
	}
	return cidrs, nil
}

// validateClusterCIDRs checks what ParseClusterCIDRs guarantees, for callers that
// build Options.ClusterCIDRs themselves.
func validateClusterCIDRs(cidrs []netip.Prefix) error {
	switch {
	case len(cidrs) > 2:
		return fmt.Errorf("--cluster-cidr: at most two CIDRs (a dual-stack pair) are allowed, got %d", len(cidrs))
	case len(cidrs) == 2 && cidrs[0].Addr().Is4() == cidrs[1].Addr().Is4():
		return fmt.Errorf("--cluster-cidr: two CIDRs must be a dual-stack pair (one IPv4, one IPv6), got %s and %s", cidrs[0], cidrs[1])
	}
	for _, c := range cidrs {
		if !c.IsValid() {
			return fmt.Errorf("--cluster-cidr: invalid CIDR %s", c)
		}
	}
	return nil
}

package minicloud

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/stratus-ccm/stratus/minicloud/dataplane"
)

// Region, zones and instance types minicloud offers.
const (
	Region = "mc-central"
)

// Zones are the zones of Region.
var Zones = []string{"mc-central-a", "mc-central-b", "mc-central-c"}

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// StateDir holds the database (state.db).
	StateDir string
	// Tokens are the accepted bearer tokens; at least one is required.
	Tokens []string
	// InstanceCIDR, PublicCIDR and VIPCIDR are the pools of instance
	// private IPs, instance public IPs and load-balancer VIPs.
	InstanceCIDR, PublicCIDR, VIPCIDR netip.Prefix
	// RateLimit is requests per second per token (0 = unlimited); Burst is
	// the bucket size (0 = max(1, RateLimit)).
	RateLimit float64
	Burst     int
	// UnlimitedTokens are tokens (also listed in Tokens) the rate limit
	// does not apply to: an operator's or a test harness's tooling that must
	// not spend the budget of the token a manager under test uses.
	UnlimitedTokens []string
	// LBProvisionDelay is how long a new load balancer stays
	// "provisioning" before it becomes "active" and carries traffic.
	LBProvisionDelay time.Duration
	// DataPlane tunes health-check thresholds and timeouts.
	DataPlane dataplane.Options
	// NoDataPlane serves the API only: load balancers still provision and
	// become active, but nothing listens on their VIPs and no target is
	// probed (target health stays "unknown"). For benchmarks of the API
	// side, where thousands of targets behind hundreds of load balancers
	// would make the data plane the biggest load on the machine.
	NoDataPlane bool
	// PeerNetworks are other clouds' networks that load balancers can send
	// traffic to (IP targets), as a VPN or interconnect would let them: a
	// target address in Network is reached at the same offset in Via, a
	// loopback block of the same size where the other cloud's machines
	// listen on a laptop. Target addresses elsewhere are reached as they are.
	PeerNetworks []PeerNetwork
	// KernelRoutes, if set, programs the routes minicloud holds as kernel
	// routes in a network namespace, so that they carry packets between
	// real machines (see KernelRoutes).
	KernelRoutes *KernelRoutes
	// Logger receives the server's logs (default: discard).
	Logger logr.Logger
}

// PeerNetwork maps another cloud's network onto a loopback block (see
// Config.PeerNetworks).
type PeerNetwork struct {
	Network, Via netip.Prefix
}

// ParsePeerNetwork parses "NETWORK=VIA", e.g. "10.0.0.0/16=127.78.0.0/16".
func ParsePeerNetwork(s string) (PeerNetwork, error) {
	network, via, ok := strings.Cut(s, "=")
	if !ok {
		return PeerNetwork{}, fmt.Errorf("peer network %q: want NETWORK=VIA, e.g. 10.0.0.0/16=127.78.0.0/16", s)
	}
	n, err := netip.ParsePrefix(strings.TrimSpace(network))
	if err != nil {
		return PeerNetwork{}, fmt.Errorf("peer network %q: %w", s, err)
	}
	v, err := netip.ParsePrefix(strings.TrimSpace(via))
	if err != nil {
		return PeerNetwork{}, fmt.Errorf("peer network %q: %w", s, err)
	}
	pn := PeerNetwork{Network: n.Masked(), Via: v.Masked()}
	return pn, pn.validate()
}

func (p PeerNetwork) validate() error {
	switch {
	case !p.Network.IsValid() || !p.Via.IsValid():
		return fmt.Errorf("peer network %s=%s: both prefixes are required", p.Network, p.Via)
	case p.Network.Bits() != p.Via.Bits() || p.Network.Addr().Is4() != p.Via.Addr().Is4():
		return fmt.Errorf("peer network %s=%s: the prefixes must be of the same family and size", p.Network, p.Via)
	case !p.Via.Addr().IsLoopback():
		return fmt.Errorf("peer network %s=%s: the via block must be on loopback", p.Network, p.Via)
	}
	return nil
}

// Translate returns where a target address is reached: its counterpart in
// Via when Network holds it (true), else the address itself (false).
func (p PeerNetwork) Translate(a netip.Addr) (netip.Addr, bool) {
	if !p.Network.Contains(a) {
		return a, false
	}
	n, v, x := p.Network.Addr().As16(), p.Via.Addr().As16(), a.As16()
	for i := range x {
		x[i] = v[i] | (x[i] &^ n[i])
	}
	out := netip.AddrFrom16(x)
	if a.Is4() {
		out = out.Unmap()
	}
	return out, true
}

// DefaultConfig returns the defaults of `stratus minicloud serve`, without
// a token.
func DefaultConfig() Config {
	return Config{
		StateDir:         ".stratus/minicloud",
		InstanceCIDR:     netip.MustParsePrefix("127.10.0.0/16"),
		PublicCIDR:       netip.MustParsePrefix("127.20.0.0/16"),
		VIPCIDR:          netip.MustParsePrefix("127.100.0.0/16"),
		LBProvisionDelay: time.Second,
		Logger:           logr.Discard(),
	}
}

func (c *Config) validate() error {
	if c.StateDir == "" {
		return fmt.Errorf("minicloud config: state dir is required")
	}
	if len(c.Tokens) == 0 {
		return fmt.Errorf("minicloud config: at least one token is required")
	}
	for _, t := range c.Tokens {
		if t == "" {
			return fmt.Errorf("minicloud config: empty token")
		}
	}
	for name, p := range map[string]netip.Prefix{"instance CIDR": c.InstanceCIDR, "public CIDR": c.PublicCIDR, "VIP CIDR": c.VIPCIDR} {
		if !p.IsValid() {
			return fmt.Errorf("minicloud config: %s is not set", name)
		}
		if p.Addr().BitLen()-p.Bits() < 2 {
			return fmt.Errorf("minicloud config: %s %s is too small", name, p)
		}
	}
	for _, t := range c.UnlimitedTokens {
		if !slices.Contains(c.Tokens, t) {
			return fmt.Errorf("minicloud config: an unlimited token is not one of the tokens")
		}
	}
	if c.RateLimit < 0 || c.Burst < 0 {
		return fmt.Errorf("minicloud config: rate limit and burst must not be negative")
	}
	for _, p := range c.PeerNetworks {
		if err := p.validate(); err != nil {
			return fmt.Errorf("minicloud config: %w", err)
		}
	}
	if c.LBProvisionDelay < 0 {
		return fmt.Errorf("minicloud config: LB provision delay must not be negative")
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	return nil
}

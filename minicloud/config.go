package minicloud

import (
	"fmt"
	"net/netip"
	"slices"
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
	// Logger receives the server's logs (default: discard).
	Logger logr.Logger
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
	if c.LBProvisionDelay < 0 {
		return fmt.Errorf("minicloud config: LB provision delay must not be negative")
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	return nil
}

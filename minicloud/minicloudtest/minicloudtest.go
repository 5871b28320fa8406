// Package minicloudtest runs a minicloud server in-process for tests of
// other packages: a fresh state directory, a free API port, and address
// pools (instance IPs, public IPs, VIPs) picked at random per test, so
// parallel tests and test packages do not bind the same VIPs.
//
//	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 50 * time.Millisecond})
//	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{...})
//	be := minicloudtest.StartBackend(t, "a", inst.PrivateIP, minicloudtest.BackendOptions{TCP: true})
//	lb, err := mc.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{... TargetPort: be.Port ...})
//	mc.WaitLoadBalancer(t, lb.ID, minicloudtest.Active)
//	counts := minicloudtest.CountTCP(t, net.JoinHostPort(lb.VIP, "8080"), 4)
package minicloudtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/dataplane"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

// Options configure Start. The zero value is a cloud without rate limits
// whose load balancers become active immediately.
type Options struct {
	// Token is the bearer token (default: random).
	Token string
	// ExtraTokens are further accepted tokens, e.g. one per client whose
	// rate limit and stats should be separate.
	ExtraTokens []string
	// UnlimitedTokens (from ExtraTokens) are not rate limited.
	UnlimitedTokens []string
	// RateLimit and Burst are per-token limits (0 = unlimited).
	RateLimit float64
	Burst     int
	// LBProvisionDelay is how long load balancers stay provisioning.
	LBProvisionDelay time.Duration
	// StateDir is the state directory (default: a fresh t.TempDir()).
	// Reuse one to restart a cloud on the same state.
	StateDir string
	// InstanceCIDR, PublicCIDR and VIPCIDR default to random /24s in
	// 127.10-11.x.0, 127.20-21.x.0 and 127.100-199.x.0.
	InstanceCIDR, PublicCIDR, VIPCIDR netip.Prefix
	// DataPlane tunes health checks.
	DataPlane dataplane.Options
	// NoDataPlane serves the API only (minicloud.Config.NoDataPlane).
	NoDataPlane bool
	// PeerNetworks are other clouds' networks the load balancers reach
	// (minicloud.Config.PeerNetworks).
	PeerNetworks []minicloud.PeerNetwork
	// OpenStack, when set, also serves the OpenStack dialect (package
	// minicloud/openstack) with these options.
	OpenStack *openstack.Options
}

// Cloud is a running minicloud.
type Cloud struct {
	// URL is the API base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Token authenticates to the API.
	Token string
	// Client is a client of URL with Token.
	Client *client.Client
	// Config is the server's configuration (with the chosen CIDRs).
	Config minicloud.Config
	// OpenStack is the OpenStack dialect when Options.OpenStack was set,
	// and IdentityURL its Keystone endpoint (URL + "/identity/v3").
	OpenStack   *openstack.Dialect
	IdentityURL string

	stop context.CancelFunc
	done chan error
}

// Start runs a minicloud until the test ends (or Stop is called).
func Start(t testing.TB, o Options) *Cloud {
	t.Helper()
	cfg := minicloud.DefaultConfig()
	cfg.Tokens = []string{o.Token}
	if o.Token == "" {
		cfg.Tokens = []string{RandomToken()}
	}
	cfg.Tokens = append(cfg.Tokens, o.ExtraTokens...)
	cfg.RateLimit, cfg.Burst = o.RateLimit, o.Burst
	cfg.UnlimitedTokens = o.UnlimitedTokens
	cfg.LBProvisionDelay = o.LBProvisionDelay
	cfg.StateDir = o.StateDir
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	cfg.InstanceCIDR = orRandom(t, o.InstanceCIDR, 10, 2)
	cfg.PublicCIDR = orRandom(t, o.PublicCIDR, 20, 2)
	cfg.VIPCIDR = orRandom(t, o.VIPCIDR, 100, 100)
	cfg.DataPlane = o.DataPlane
	cfg.NoDataPlane = o.NoDataPlane
	cfg.PeerNetworks = o.PeerNetworks
	cfg.Logger = testr.NewWithInterface(t, testr.Options{LogTimestamp: true})

	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		t.Fatalf("minicloudtest: %v", err)
	}
	var dialect *openstack.Dialect
	if o.OpenStack != nil {
		if dialect, err = openstack.Mount(srv, *o.OpenStack); err != nil {
			srv.Close()
			t.Fatalf("minicloudtest: %v", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatalf("minicloudtest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mc := &Cloud{URL: "http://" + ln.Addr().String(), Token: cfg.Tokens[0], Config: cfg, OpenStack: dialect, stop: cancel, done: make(chan error, 1)}
	if dialect != nil {
		mc.IdentityURL = mc.URL + openstack.IdentityPrefix + "/v3"
	}
	go func() { mc.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := mc.Stop(); err != nil {
			t.Errorf("minicloudtest: %v", err)
		}
	})
	mc.Client, err = client.New(mc.URL, mc.Token)
	if err != nil {
		t.Fatalf("minicloudtest: %v", err)
	}
	return mc
}

// Stop shuts the cloud down and waits until its listeners are closed and
// its database is closed. Calling it again does nothing.
func (c *Cloud) Stop() error {
	c.stop()
	err, ok := <-c.done
	if !ok {
		return nil
	}
	close(c.done)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// RandomToken returns a random bearer token.
func RandomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// inUse holds the random pools of the clouds running in this process, so
// parallel tests never share one (across processes, the random choice
// makes sharing unlikely).
var inUse = struct {
	sync.Mutex
	m map[netip.Prefix]bool
}{m: map[netip.Prefix]bool{}}

// orRandom returns p, or a random /24 in 127.<base..base+spread-1>.<0..255>
// that no other cloud of this process uses until the test ends.
func orRandom(t testing.TB, p netip.Prefix, base, spread int) netip.Prefix {
	if p.IsValid() {
		return p
	}
	inUse.Lock()
	defer inUse.Unlock()
	for {
		a := netip.AddrFrom4([4]byte{127, byte(base + mrand.IntN(spread)), byte(mrand.IntN(256)), 0})
		p = netip.PrefixFrom(a, 24)
		if !inUse.m[p] {
			break
		}
	}
	inUse.m[p] = true
	t.Cleanup(func() {
		inUse.Lock()
		defer inUse.Unlock()
		delete(inUse.m, p)
	})
	return p
}

// WaitLoadBalancer polls load balancer id until cond holds, failing the
// test after 10 seconds; it returns the last state seen.
func (c *Cloud) WaitLoadBalancer(t testing.TB, id string, cond func(*api.LoadBalancer) bool) *api.LoadBalancer {
	t.Helper()
	var last *api.LoadBalancer
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		lb, err := c.Client.GetLoadBalancer(ctx, id)
		if err != nil {
			return false, err
		}
		last = lb
		return cond(lb), nil
	})
	if err != nil {
		t.Fatalf("minicloudtest: load balancer %s: condition not met: %v; last seen %+v", id, err, last)
	}
	return last
}

// Active is a WaitLoadBalancer condition: the load balancer carries traffic.
func Active(lb *api.LoadBalancer) bool { return lb.State == api.LBActive }

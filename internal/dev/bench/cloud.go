package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// startMinicloud runs a minicloud for a scenario and writes the minicloud
// provider's cloud config; it returns the scenario's env (without its
// Kubernetes client) and the managers' provider flags.
func startMinicloud(ctx context.Context, dir string, o Options) (*env, []string, func(), error) {
	e, stopCloud, err := startMinicloudEnv(ctx, filepath.Join(dir, "minicloud"), o.Cloud, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*env, []string, func(), error) { stopCloud(); return nil, nil, nil, err }
	cloudConfig := filepath.Join(dir, "cloud.yaml")
	// The provider keeps under the token's limit on its own (rateLimit), so
	// neither manager spends requests on 429 answers; its burst is half the
	// server's, which leaves room for requests that arrive bunched.
	provider := fmt.Sprintf("url: %s\ntoken: %s\n", e.cloudURL, e.managerToken)
	if o.Cloud.RateLimit > 0 {
		provider += fmt.Sprintf("rateLimit: %g\nburst: %d\n", o.Cloud.RateLimit, max(1, o.Cloud.Burst/2))
	}
	if err := os.WriteFile(cloudConfig, []byte(provider), 0o600); err != nil {
		return fail(err)
	}
	return e, []string{"--cloud-provider=minicloud", "--cloud-config=" + cloudConfig}, stopCloud, nil
}

// startMinicloudEnv runs a minicloud with l's limits (and the OpenStack
// dialect when dialect is set) and returns the scenario's env, without its
// Kubernetes client, and the function that stops the cloud.
func startMinicloudEnv(ctx context.Context, dir string, l CloudLimits, dialect *mos.Options) (*env, func(), error) {
	cloudURL, token, floating, stopCloud, err := startCloud(ctx, dir, l, dialect)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*env, func(), error) { stopCloud(); return nil, nil, err }
	// The harness has its own unlimited token, so its calls neither count in
	// the manager's stats nor spend the manager's rate limit.
	harness, err := client.New(cloudURL, token[1])
	if err != nil {
		return fail(err)
	}
	if l.LatencyMS > 0 {
		if _, err := harness.SetFaults(ctx, api.Faults{LatencyMS: l.LatencyMS}); err != nil {
			return fail(fmt.Errorf("set minicloud latency: %w", err))
		}
	}
	mgrCloud, err := client.New(cloudURL, token[0])
	if err != nil {
		return fail(err)
	}
	e := &env{
		cloud: harness, mgrCloud: mgrCloud, instances: map[string]*api.Instance{},
		cloudURL: cloudURL, managerToken: token[0], harnessToken: token[1],
		providerID: mcprovider.ProviderID,
	}
	if dialect != nil {
		e.floatingPool = floating
	}
	return e, stopCloud, nil
}

// startCloud runs a minicloud in this process with two tokens: [0] for the
// manager, [1] for the harness, and, when dialect is set, its OpenStack
// dialect, whose load balancers provision for l.OpenStackProvisionDelay. It
// returns the cloud's URL, the tokens and its public pool (the dialect's
// floating IPs).
func startCloud(ctx context.Context, dir string, l CloudLimits, dialect *mos.Options) (string, [2]string, netip.Prefix, func(), error) {
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = dir
	tokens := [2]string{randomToken(), randomToken()}
	cfg.Tokens = tokens[:]
	cfg.RateLimit, cfg.Burst = l.RateLimit, l.Burst
	// The harness's own calls (creating thousands of instances, reading
	// load balancers while waiting) neither count nor are limited.
	cfg.UnlimitedTokens = []string{tokens[1]}
	cfg.LBProvisionDelay = l.LBProvisionDelay
	if dialect != nil {
		cfg.LBProvisionDelay = l.OpenStackProvisionDelay
	}
	// The managers only see the API. With every node behind every load
	// balancer (5,000 x 1,000 in memory) health-checking them would make
	// the harness the biggest load on the machine.
	cfg.NoDataPlane = true
	cfg.Logger = logr.Discard()
	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		return "", tokens, netip.Prefix{}, nil, err
	}
	if dialect != nil {
		if _, err := mos.Mount(srv, *dialect); err != nil {
			srv.Close()
			return "", tokens, netip.Prefix{}, nil, fmt.Errorf("OpenStack dialect: %w", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return "", tokens, netip.Prefix{}, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), tokens, cfg.PublicCIDR, func() { cancel(); <-done }, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

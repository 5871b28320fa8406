package devenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// startCloud starts minicloud in this process, on the environment's port
// and state, as a cloudServer that the control socket can stop and start.
func (e *env) startCloud(ctx context.Context, logger logr.Logger) (*cloudServer, error) {
	dir := filepath.Join(e.opts.StateDir, "minicloud")
	token, tokenFile, err := loadOrCreateToken(dir)
	if err != nil {
		return nil, err
	}
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = dir
	cfg.Tokens = []string{token}
	cfg.InstanceCIDR, cfg.PublicCIDR, cfg.VIPCIDR = addressPools(e.block)
	if e.vsphere() {
		// The instance pool's upper half is where the VMs' node agents
		// listen; load balancers reach the VMs' network there.
		peer := peerNetwork(e.block)
		cfg.InstanceCIDR = netip.PrefixFrom(cfg.InstanceCIDR.Addr(), peer.Via.Bits())
		cfg.PeerNetworks = []minicloud.PeerNetwork{peer}
	}
	if e.real != nil {
		// Real nodes' instances are on the bridge's network, their VIPs
		// routed to the host from it, and the routes minicloud holds are
		// the router's kernel routes.
		cfg.InstanceCIDR = e.real.net.instancePool()
		cfg.VIPCIDR = e.real.net.vipNet
		cfg.KernelRoutes = &minicloud.KernelRoutes{Netns: e.real.net.router}
	}
	cfg.Logger = logger
	cloud := &cloudServer{cfg: cfg, addr: e.cloudAddr(), log: logger, say: e.say, base: ctx}
	if e.openstack() {
		cloud.mount = mountOpenStack
	}
	if err := cloud.start(); err != nil {
		return nil, err
	}
	e.cloud.url = "http://" + cloud.addr
	e.cloud.token, e.cloud.tokenFile = token, tokenFile
	if e.cloud.client, err = client.New(e.cloud.url, token, client.WithUserAgent("stratus-dev")); err != nil {
		_ = cloud.stop()
		return nil, fmt.Errorf("minicloud client: %w", err)
	}
	return cloud, nil
}

// loadOrCreateToken returns the cloud's token from <dir>/token, creating it
// the first time (where `stratus minicloud` client commands also look).
func loadOrCreateToken(dir string) (token, path string, err error) {
	path = filepath.Join(dir, "token")
	if raw, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(raw)) != "" {
		return strings.TrimSpace(string(raw)), path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("minicloud token: %w", err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("minicloud token: %w", err)
	}
	token = hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("minicloud token: %w", err)
	}
	return token, path, nil
}

// ensureInstances makes sure at least opts.Nodes instances carry the node
// tag, creating node-1, node-2, ... spread over the zones, and returns the
// names of the running ones.
func (e *env) ensureInstances(ctx context.Context) ([]string, error) {
	existing, err := e.cloud.client.ListInstances(ctx, client.ListOptions{Tags: map[string]string{NodeTagKey: NodeTagValue}})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	names := map[string]bool{}
	var running []string
	for _, in := range existing {
		names[in.Name] = true
		if in.State == api.InstanceRunning {
			running = append(running, in.Name)
		}
	}
	for i := 1; len(names) < e.opts.Nodes; i++ {
		name := "node-" + strconv.Itoa(i)
		if names[name] {
			continue
		}
		in, err := e.cloud.client.CreateInstance(ctx, api.InstanceCreate{
			Name: name, Type: instanceType, Zone: minicloud.Zones[(i-1)%len(minicloud.Zones)],
			Tags: map[string]string{NodeTagKey: NodeTagValue},
		}, client.WithIdempotencyKey(e.opts.StateDir+"/"+name))
		if err != nil {
			return nil, fmt.Errorf("create instance %s: %w", name, err)
		}
		e.say("minicloud: created instance %s (%s, %s, %s)", in.Name, in.ID, in.Zone, in.PrivateIP)
		names[name] = true
		running = append(running, in.Name)
	}
	sort.Strings(running)
	return running, nil
}

package minicloudcmd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

type serveOptions struct {
	listen       string
	stateDir     string
	tokens       []string
	tokenFile    string
	instanceCIDR string
	publicCIDR   string
	vipCIDR      string
	peerNetworks []string
	verbose      bool
	openstack    bool
	osOpts       openstack.Options
}

func newServeCommand() *cobra.Command {
	def := minicloud.DefaultConfig()
	o := serveOptions{}
	cfg := def
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the minicloud API server and data plane",
		Long: `Run the minicloud API server and its L4 data plane.

State lives in a bbolt database under --state-dir and survives restarts and
crashes. Without --token or --token-file, the token is read from (or, the first
time, generated into) <state-dir>/token, where the client commands find it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			cfg.StateDir = o.stateDir
			if cfg.InstanceCIDR, err = parsePrefixFlag("--instance-cidr", o.instanceCIDR); err != nil {
				return err
			}
			if cfg.PublicCIDR, err = parsePrefixFlag("--public-cidr", o.publicCIDR); err != nil {
				return err
			}
			if cfg.VIPCIDR, err = parsePrefixFlag("--vip-cidr", o.vipCIDR); err != nil {
				return err
			}
			for _, v := range o.peerNetworks {
				pn, err := minicloud.ParsePeerNetwork(v)
				if err != nil {
					return fmt.Errorf("--peer-network: %w", err)
				}
				cfg.PeerNetworks = append(cfg.PeerNetworks, pn)
			}
			if cfg.Tokens, err = o.resolveTokens(cmd); err != nil {
				return err
			}
			level := slog.LevelInfo
			if o.verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			srv, err := minicloud.NewServer(cfg)
			if err != nil {
				return err
			}
			if o.openstack {
				if _, err := openstack.Mount(srv, o.osOpts); err != nil {
					srv.Close()
					return err
				}
			}
			ln, err := net.Listen("tcp", o.listen)
			if err != nil {
				srv.Close()
				return fmt.Errorf("listen on %s: %w", o.listen, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "minicloud listening on http://%s (state in %s)\n", ln.Addr(), cfg.StateDir)
			if o.openstack {
				fmt.Fprintf(cmd.OutOrStdout(), "OpenStack identity endpoint http://%s%s/v3 (project %s, domain %s, password: a token)\n", ln.Addr(), openstack.IdentityPrefix, openstack.ProjectName, openstack.DomainName)
			}
			return srv.Serve(cmd.Context(), ln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", defaultListen, "API listen address")
	f.BoolVar(&o.openstack, "openstack", true, "also serve the OpenStack dialect (Keystone, Nova, Neutron, Octavia) under /identity, /compute, /network, /load-balancer")
	f.DurationVar(&o.osOpts.TokenTTL, "openstack-token-ttl", time.Hour, "lifetime of the dialect's Keystone tokens")
	f.IntVar(&o.osOpts.MaxPageSize, "openstack-max-page-size", 1000, "largest page of the dialect's lists (limit is capped to it)")
	f.DurationVar(&o.osOpts.PendingDelay, "openstack-pending-delay", 0, "how long an Octavia load balancer stays PENDING_UPDATE / PENDING_DELETE after a write")
	f.StringSliceVar(&o.osOpts.HiddenExtensions, "openstack-hide-extension", nil, "Neutron extension alias neither listed nor served, as on a cloud without it: extraroute-atomic or allowed-address-pairs (repeatable)")
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir, "directory of the state database")
	f.StringSliceVar(&o.tokens, "token", nil, "accepted bearer token (repeatable)")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the accepted bearer token")
	f.StringVar(&o.instanceCIDR, "instance-cidr", def.InstanceCIDR.String(), "pool of instance private IPs (on loopback, so the data plane reaches them)")
	f.StringVar(&o.publicCIDR, "public-cidr", def.PublicCIDR.String(), "pool of instance public IPs")
	f.StringVar(&o.vipCIDR, "vip-cidr", def.VIPCIDR.String(), "pool of load-balancer VIPs (on loopback)")
	f.StringSliceVar(&o.peerNetworks, "peer-network", nil, "NETWORK=VIA: another cloud's network that load balancers reach through the loopback block VIA, e.g. 10.0.0.0/16=127.78.0.0/16 (repeatable)")
	f.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests per second per token (0 = unlimited)")
	f.IntVar(&cfg.Burst, "burst", 0, "rate-limit bucket size (0 = max(1, rate-limit))")
	f.DurationVar(&cfg.LBProvisionDelay, "lb-provision-delay", def.LBProvisionDelay, "time a new load balancer stays provisioning")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "debug logging")
	return cmd
}

func parsePrefixFlag(name, v string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q: %w", name, v, err)
	}
	return p.Masked(), nil
}

// resolveTokens returns the tokens of --token and --token-file, or the one
// in <state-dir>/token, generating it the first time.
func (o serveOptions) resolveTokens(cmd *cobra.Command) ([]string, error) {
	tokens := append([]string(nil), o.tokens...)
	if o.tokenFile != "" {
		raw, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		t := strings.TrimSpace(string(raw))
		if t == "" {
			return nil, fmt.Errorf("--token-file %s is empty", o.tokenFile)
		}
		tokens = append(tokens, t)
	}
	if len(tokens) > 0 {
		return tokens, nil
	}
	path := filepath.Join(o.stateDir, tokenFileName)
	raw, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(raw)) != "" {
		return []string{strings.TrimSpace(string(raw))}, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read token: %w", err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	t := hex.EncodeToString(b)
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write token: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "generated a token in %s\n", path)
	return []string{t}, nil
}

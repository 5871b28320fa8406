// Package vcsimcmd is the `stratus vcsim` command tree: the command itself
// serves a simulated vCenter (vcsim) until Ctrl-C, and `vm` and
// `requests` drive a running one through its control API.
package vcsimcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/internal/dev/cli/table"
	"github.com/stratus-ccm/stratus/vcsim"
)

// Defaults shared by the server and the client commands.
const (
	defaultListen   = "127.0.0.1:8989"
	defaultStateDir = ".stratus/vcsim"
	defaultVMs      = 3
	caFileName      = "ca.pem"
	configFileName  = "cloud-config.yaml"
	// ReadyLine is printed once the server answers.
	ReadyLine = "vcsim ready; Ctrl-C stops it"
)

// NewCommand returns the `vcsim` command.
func NewCommand() *cobra.Command {
	var (
		o          vcsim.Options
		useTLS     bool
		stateDir   string
		thumbprint bool
	)
	cmd := &cobra.Command{
		Use:   "vcsim",
		Short: "Serve a simulated vCenter (govmomi's simulator) with node VMs, zones and regions, until Ctrl-C",
		Long: `vcsim serves a simulated vCenter on --listen until Ctrl-C: datacenter DC0
with a cluster of three hosts (zone-a) and a standalone host (zone-b), tagged
with the categories k8s-zone and k8s-region (region-1), and --vms powered-on
node VMs (node-0, node-1, …) alternating between the zones, each reporting
its name as guest hostname and 10.0.0.<i+1> on "VM Network".

It prints the URL, the credentials, the certificate's thumbprint and the path
of its CA file, and a cloud config for the upstream vSphere provider, and
writes them under --state-dir (server.json, ca.pem, cloud-config.yaml), where
"stratus vcsim vm" and "stratus vcsim requests" find the server. See
docs/vsphere.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.DisableTLS = !useTLS
			o.Control = true
			if err := os.MkdirAll(stateDir, 0o755); err != nil {
				return fmt.Errorf("--state-dir: %w", err)
			}
			if !o.DisableTLS {
				abs, err := filepath.Abs(filepath.Join(stateDir, caFileName))
				if err != nil {
					return fmt.Errorf("--state-dir: %w", err)
				}
				o.CAFile = abs
			}
			s, err := vcsim.Start(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer s.Close()
			trust := vcsim.TrustCAFile
			if thumbprint {
				trust = vcsim.TrustThumbprint
			}
			config := s.CloudConfig(trust)
			configFile := filepath.Join(stateDir, configFileName)
			if err := os.WriteFile(configFile, config, 0o600); err != nil {
				return fmt.Errorf("write the cloud config: %w", err)
			}
			if err := vcsim.WriteState(stateDir, s.State()); err != nil {
				return err
			}
			printBanner(cmd, s, configFile, config)
			<-cmd.Context().Done()
			fmt.Fprintln(cmd.OutOrStdout(), "vcsim stopping")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", defaultListen, "address to serve on")
	f.IntVar(&o.VMs, "vms", defaultVMs, "number of node VMs")
	f.StringVar(&o.NamePattern, "name-pattern", vcsim.DefaultNamePattern, "node VM names, with one %d for the index")
	f.BoolVar(&o.IPv6, "ipv6", false, "also give each node VM an IPv6 address (fd00:10::<i+1>)")
	f.StringVar(&o.Username, "username", vcsim.DefaultUsername, "the only user name accepted")
	f.StringVar(&o.Password, "password", vcsim.DefaultPassword, "the only password accepted")
	f.BoolVar(&useTLS, "tls", true, "serve HTTPS with a fresh self-signed certificate; --tls=false serves plain HTTP, which the upstream vSphere provider cannot use")
	f.BoolVar(&thumbprint, "thumbprint", false, "pin the certificate's thumbprint in the cloud config instead of naming the CA file")
	f.DurationVar(&o.SessionTimeout, "session-timeout", 0, "expire sessions idle this long (default: never, as the simulator does)")
	f.DurationVar(&o.Latency, "latency", 0, "delay added to every vCenter request")
	f.StringVar(&o.ZoneCategory, "zone-category", vcsim.DefaultZoneCategory, "tag category of the zones")
	f.StringVar(&o.RegionCategory, "region-category", vcsim.DefaultRegionCategory, "tag category of the regions")
	f.StringVar(&stateDir, "state-dir", defaultStateDir, "where to write server.json, ca.pem and cloud-config.yaml")
	cmd.AddCommand(newVMCommand(), newRequestsCommand())
	return cmd
}

func printBanner(cmd *cobra.Command, s *vcsim.Server, configFile string, config []byte) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "vcsim: simulated vCenter at %s (%d node VMs; datacenters %s; zones %s)\n",
		s.URL(), len(s.Nodes()), strings.Join(s.Datacenters(), ","), strings.Join(s.Zones(), ","))
	fmt.Fprintf(w, "  username:   %s\n  password:   %s\n", s.Username(), s.Password())
	if s.TLS() {
		fmt.Fprintf(w, "  thumbprint: %s\n  CA file:    %s\n", s.Thumbprint(), s.CAFile())
	}
	fmt.Fprintf(w, "  govc:       export GOVC_URL=%s GOVC_USERNAME=%s GOVC_PASSWORD=%s", s.URL(), s.Username(), s.Password())
	if s.TLS() {
		fmt.Fprintf(w, " GOVC_TLS_CA_CERTS=%s", s.CAFile())
	}
	fmt.Fprintf(w, "\ncloud config for the upstream vSphere provider (%s):\n%s", configFile, config)
	fmt.Fprintln(w, ReadyLine)
}

// clientFlags are the connection flags of the client commands.
type clientFlags struct {
	stateDir                   string
	server, username, password string
	caFile, thumbprint         string
	insecure                   bool
	output                     string
}

func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	p := cmd.PersistentFlags()
	stateDir := defaultStateDir
	if dir := os.Getenv(vcsim.StateDirEnv); dir != "" {
		stateDir = dir
	}
	p.StringVar(&f.stateDir, "state-dir", stateDir, "state dir of the running `stratus vcsim` (or `stratus dev --cloud vsphere`), for the defaults of the other flags; $"+vcsim.StateDirEnv+" sets its default")
	p.StringVar(&f.server, "server", "", "server URL (default: from the state dir, else https://"+defaultListen+")")
	p.StringVar(&f.username, "username", "", "user name (default: from the state dir, else "+vcsim.DefaultUsername+")")
	p.StringVar(&f.password, "password", "", "password (default: from the state dir, else "+vcsim.DefaultPassword+")")
	p.StringVar(&f.caFile, "ca-file", "", "CA certificate of an HTTPS server (default: from the state dir)")
	p.StringVar(&f.thumbprint, "thumbprint", "", "SHA-1 thumbprint to pin instead of --ca-file")
	p.BoolVar(&f.insecure, "insecure", false, "do not verify the server's certificate (when there is no CA file or thumbprint)")
	p.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	return f
}

// remote builds a control API client from the flags, filling what they
// leave out from <state-dir>/server.json when it exists.
func (f *clientFlags) remote() (*vcsim.Remote, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output %q: want table or json", f.output)
	}
	st, err := vcsim.ReadState(f.stateDir)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		st = vcsim.State{Server: "https://" + defaultListen, Username: vcsim.DefaultUsername, Password: vcsim.DefaultPassword}
	default:
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	o := st.RemoteOptions()
	o.Insecure = f.insecure
	for _, v := range []struct{ flag, dst *string }{{&f.server, &o.Server}, {&f.username, &o.Username}, {&f.password, &o.Password}} {
		if *v.flag != "" {
			*v.dst = *v.flag
		}
	}
	// An explicit trust flag replaces the stored ones, and so does another
	// --server: the state dir's certificate is not that server's.
	if f.caFile != "" || f.thumbprint != "" || f.insecure || (f.server != "" && f.server != st.Server) {
		o.CAFile, o.Thumbprint = f.caFile, f.thumbprint
	}
	r, err := vcsim.NewRemote(o)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return r, nil
}

func newVMCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "List, create, power off/on, shut down, destroy VMs of a running `stratus vcsim`, by name",
	}
	f := addClientFlags(cmd)
	printVMs := func(cmd *cobra.Command, v any, vms ...vcsim.VM) error {
		rows := make([][]string, len(vms))
		for i, vm := range vms {
			var ips []string
			for _, n := range vm.Guest.NICs {
				ips = append(ips, n.IPs...)
			}
			rows[i] = []string{vm.Name, string(vm.PowerState), vm.Zone, vm.Region, vm.Host, orDash(vm.Guest.Hostname), orDash(strings.Join(ips, ",")), vm.UUID}
		}
		return table.Print(cmd.OutOrStdout(), f.output, v, []string{"NAME", "POWER", "ZONE", "REGION", "HOST", "HOSTNAME", "IPS", "UUID"}, rows)
	}
	one := func(use, short string, op func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				r, err := f.remote()
				if err != nil {
					return err
				}
				vm, err := op(r, cmd, args[0])
				if err != nil {
					return err
				}
				return printVMs(cmd, vm, vm)
			},
		}
	}
	list := &cobra.Command{
		Use: "list", Short: "List every VM", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := f.remote()
			if err != nil {
				return err
			}
			vms, err := r.VMs(cmd.Context())
			if err != nil {
				return err
			}
			return printVMs(cmd, vms, vms...)
		},
	}
	get := one("get", "Show one VM", func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error) {
		return r.VM(cmd.Context(), name)
	})
	powerOff := one("power-off", "Power a VM off (a hard stop)", func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error) {
		return r.PowerOff(cmd.Context(), name)
	})
	powerOn := one("power-on", "Power a VM on", func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error) {
		return r.PowerOn(cmd.Context(), name)
	})
	shutdown := one("shutdown", "Shut a VM's guest down and wait until it is off", func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error) {
		return r.ShutdownGuest(cmd.Context(), name)
	})
	destroy := &cobra.Command{
		Use: "destroy NAME", Short: "Delete a VM (powered off first)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.remote()
			if err != nil {
				return err
			}
			if err := r.Destroy(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s\n", args[0])
			return nil
		},
	}

	var (
		zone, hostname, network string
		ips                     []string
		poweredOff              bool
	)
	guest := func(name string, cmd *cobra.Command) (*vcsim.Guest, error) {
		if !cmd.Flags().Changed("hostname") && !cmd.Flags().Changed("ip") {
			return nil, nil
		}
		for _, ip := range ips {
			if _, err := netip.ParseAddr(ip); err != nil {
				return nil, fmt.Errorf("--ip %q: %w", ip, err)
			}
		}
		g := &vcsim.Guest{Hostname: hostname, NICs: []vcsim.NIC{{Network: network, IPs: ips}}}
		if !cmd.Flags().Changed("hostname") {
			g.Hostname = name
		}
		return g, nil
	}
	guestFlags := func(c *cobra.Command) {
		c.Flags().StringVar(&hostname, "hostname", "", "guest hostname (default: the VM name)")
		c.Flags().StringSliceVar(&ips, "ip", nil, "guest IP address of the first NIC (repeatable)")
		c.Flags().StringVar(&network, "network", vcsim.DefaultNetwork, "network name of the first NIC")
	}
	create := one("create", "Create a VM as the node VMs are (by default: powered on, hostname = name, the next node IP)", func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error) {
		g, err := guest(name, cmd)
		if err != nil {
			return vcsim.VM{}, err
		}
		return r.Create(cmd.Context(), vcsim.VMSpec{Name: name, Zone: zone, Guest: g, PoweredOff: poweredOff})
	})
	create.Flags().StringVar(&zone, "zone", "", "zone to place the VM in, e.g. zone-b (default: the next one round-robin)")
	create.Flags().BoolVar(&poweredOff, "powered-off", false, "leave the VM powered off")
	guestFlags(create)
	setGuest := one("set-guest", "Replace the guest info a VM reports (hostname, IPs of its first NIC)", func(r *vcsim.Remote, cmd *cobra.Command, name string) (vcsim.VM, error) {
		g, err := guest(name, cmd)
		if err != nil {
			return vcsim.VM{}, err
		}
		if g == nil {
			return vcsim.VM{}, errors.New("set-guest: give --hostname or --ip")
		}
		if len(g.NICs[0].IPs) == 0 {
			g.NICs = nil
		}
		return r.SetGuest(cmd.Context(), name, *g)
	})
	guestFlags(setGuest)
	cmd.AddCommand(list, get, create, powerOff, powerOn, shutdown, destroy, setGuest)
	return cmd
}

func newRequestsCommand() *cobra.Command {
	var reset bool
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "Show the requests a running `stratus vcsim` received (SOAP by operation, REST by path)",
		Args:  cobra.NoArgs,
	}
	f := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		r, err := f.remote()
		if err != nil {
			return err
		}
		req, err := r.Requests(cmd.Context(), reset)
		if err != nil {
			return err
		}
		var rows [][]string
		for _, kind := range []struct {
			name string
			m    map[string]int
		}{{"SOAP", req.SOAP}, {"REST", req.REST}, {"HTTP", req.Other}} {
			keys := make([]string, 0, len(kind.m))
			for k := range kind.m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				rows = append(rows, []string{kind.name, k, fmt.Sprint(kind.m[k])})
			}
		}
		rows = append(rows, []string{"TOTAL", "", fmt.Sprint(req.Total())})
		return table.Print(cmd.OutOrStdout(), f.output, req, []string{"KIND", "REQUEST", "COUNT"}, rows)
	}
	cmd.Flags().BoolVar(&reset, "reset", false, "reset the counts after reading them")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Package mcdriver is the conformance driver for minicloud, the reference
// cloud: machines are minicloud instances, load balancers are read through
// the API, traffic goes through the real data plane on loopback VIPs, and
// the cloud fails through its fault injection (PUT /v1/_faults).
//
// Importing the package registers the provider "minicloud" and the
// conformance drivers "minicloud" and "minicloud-plugin" (the same provider
// served as a plugin in this process, checked through the provider
// protocol): with an empty cloud config a driver starts a minicloud
// in-process; otherwise it drives the minicloud that the provider's cloud
// config names.
package mcdriver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/pkg/conformance/plugindriver"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// Names of the registered drivers.
const (
	Name       = "minicloud"
	PluginName = "minicloud-plugin"
)

func init() {
	conformance.RegisterDriver(Name, func(ctx context.Context, o conformance.DriverOptions) (*conformance.Target, error) {
		return target(ctx, o.CloudConfig)
	})
	conformance.RegisterDriver(PluginName, func(ctx context.Context, o conformance.DriverOptions) (*conformance.Target, error) {
		t, err := target(ctx, o.CloudConfig)
		if err != nil {
			return nil, err
		}
		return plugindriver.Serve(ctx, t, o.KubeConfig)
	})
}

// target is the Target of the minicloud cloudConfig names, or of one
// started in process when it is empty.
func target(ctx context.Context, cloudConfig []byte) (*conformance.Target, error) {
	if len(cloudConfig) == 0 {
		return StartInProcess(ctx)
	}
	cfg, err := mcprovider.ParseConfig(bytes.NewReader(cloudConfig))
	if err != nil {
		return nil, fmt.Errorf("minicloud driver: %w", err)
	}
	token, err := cfg.ResolveToken()
	if err != nil {
		return nil, fmt.Errorf("minicloud driver: %w", err)
	}
	c, err := client.New(cfg.URL, token)
	if err != nil {
		return nil, fmt.Errorf("minicloud driver: url: %w", err)
	}
	return &conformance.Target{Provider: mcprovider.ProviderName, CloudConfig: cloudConfig, Driver: New(c)}, nil
}

// Driver drives a minicloud through its API.
type Driver struct {
	c *client.Client

	mu    sync.Mutex
	names map[string]string // instance ID -> node name, of created machines
	ids   map[string]string // node name -> instance ID, of created machines
	n     int
}

var (
	_ conformance.LoadBalancerDriver = (*Driver)(nil)
	_ conformance.TrafficDriver      = (*Driver)(nil)
	_ conformance.FaultDriver        = (*Driver)(nil)
	_ conformance.RouteDriver        = (*Driver)(nil)
)

// New returns a driver of the minicloud c reaches. c must be allowed to
// set faults.
func New(c *client.Client) *Driver {
	return &Driver{c: c, names: map[string]string{}, ids: map[string]string{}}
}

// Client is the driver's client of the minicloud API.
func (d *Driver) Client() *client.Client { return d.c }

// Cloud is a minicloud Start runs in this process.
type Cloud struct {
	// URL and Token reach its API.
	URL, Token string
	// Config is the server's configuration, with the chosen pools.
	Config minicloud.Config
	// Driver drives it.
	Driver *Driver
	// Close stops it and removes its state.
	Close func()
}

// StartInProcess runs a minicloud in this process (Start) and returns the
// Target of the minicloud provider for it; Target.Close stops it.
func StartInProcess(ctx context.Context) (*conformance.Target, error) {
	c, err := Start(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &conformance.Target{
		Provider:    mcprovider.ProviderName,
		CloudConfig: fmt.Appendf(nil, "url: %s\ntoken: %s\n", c.URL, c.Token),
		Driver:      c.Driver,
		Close:       c.Close,
	}, nil
}

// Start runs a minicloud in this process on random loopback address
// pools, with load balancers active at once. mount, when not nil, is
// called before the server serves, to add an API dialect
// (minicloud/openstack's Mount).
func Start(ctx context.Context, mount func(*minicloud.Server) error) (*Cloud, error) {
	dir, err := os.MkdirTemp("", "minicloud-conformance-")
	if err != nil {
		return nil, fmt.Errorf("minicloud driver: %w", err)
	}
	b := make([]byte, 16)
	rand.Read(b)
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = dir
	cfg.Tokens = []string{hex.EncodeToString(b)}
	cfg.LBProvisionDelay = 0
	// Random pools keep this cloud apart from others on the machine (a
	// dev environment, tests).
	cfg.InstanceCIDR = randomPool(10, 2)
	cfg.PublicCIDR = randomPool(20, 2)
	cfg.VIPCIDR = randomPool(100, 100)
	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("minicloud driver: %w", err)
	}
	if mount != nil {
		if err := mount(srv); err != nil {
			srv.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("minicloud driver: %w", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("minicloud driver: listen: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	url := "http://" + ln.Addr().String()
	c, err := client.New(url, cfg.Tokens[0])
	if err != nil {
		cancel()
		<-done
		os.RemoveAll(dir)
		return nil, fmt.Errorf("minicloud driver: %w", err)
	}
	return &Cloud{
		URL: url, Token: cfg.Tokens[0], Config: cfg, Driver: New(c),
		Close: func() {
			cancel()
			<-done
			os.RemoveAll(dir)
		},
	}, nil
}

// randomPool returns a random /24 in 127.<base..base+spread-1>.x.0.
func randomPool(base, spread int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(base + mrand.IntN(spread)), byte(mrand.IntN(256)), 0}), 24)
}

// CreateMachine creates a running instance named name, with a public IP
// and an IPv6 address on every other machine, in the zones round-robin.
func (d *Driver) CreateMachine(ctx context.Context, name string) (*conformance.Machine, error) {
	regions, err := d.c.Regions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list regions: %w", err)
	}
	types, err := d.c.InstanceTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list instance types: %w", err)
	}
	if len(regions) == 0 || len(regions[0].Zones) == 0 || len(types) == 0 {
		return nil, errors.New("the cloud has no zone or no instance type")
	}
	d.mu.Lock()
	d.n++
	i := d.n
	d.mu.Unlock()
	in, err := d.c.CreateInstance(ctx, api.InstanceCreate{
		Name: name, Type: types[i%len(types)].Name, Zone: regions[0].Zones[i%len(regions[0].Zones)],
		PublicIP: i%2 == 1, IPv6: i%2 == 0,
	})
	if err != nil {
		return nil, fmt.Errorf("create instance %s: %w", name, err)
	}
	d.mu.Lock()
	d.names[in.ID] = name
	d.ids[name] = in.ID
	d.mu.Unlock()
	// What docs/providers.md says the minicloud provider reports.
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: in.PrivateIP}}
	if in.PrivateIPv6 != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: in.PrivateIPv6})
	}
	if in.PublicIP != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: in.PublicIP})
	}
	addrs = append(addrs, v1.NodeAddress{Type: v1.NodeHostName, Address: name})
	node := &v1.Node{}
	node.Name = name
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: in.PrivateIP}, {Type: v1.NodeHostName, Address: name}}
	return &conformance.Machine{
		Node: node,
		Want: cloudprovider.InstanceMetadata{
			ProviderID: mcprovider.ProviderID(in.ID), NodeAddresses: addrs,
			InstanceType: in.Type, Zone: in.Zone, Region: in.Region,
		},
	}, nil
}

// InstanceID is the instance ID of a machine: of the one created under its node
// name, else read from its minicloud provider ID.
func (d *Driver) InstanceID(m *conformance.Machine) (string, error) {
	d.mu.Lock()
	id, ok := d.ids[m.Node.Name]
	d.mu.Unlock()
	if ok {
		return id, nil
	}
	return mcprovider.InstanceIDOf(m.Want.ProviderID)
}

// StopMachine stops the instance.
func (d *Driver) StopMachine(ctx context.Context, m *conformance.Machine) error {
	id, err := d.InstanceID(m)
	if err == nil {
		_, err = d.c.StopInstance(ctx, id)
	}
	return err
}

// StartMachine starts the instance.
func (d *Driver) StartMachine(ctx context.Context, m *conformance.Machine) error {
	id, err := d.InstanceID(m)
	if err == nil {
		_, err = d.c.StartInstance(ctx, id)
	}
	return err
}

// DeleteMachine deletes the instance; one already gone is fine.
func (d *Driver) DeleteMachine(ctx context.Context, m *conformance.Machine) error {
	id, err := d.InstanceID(m)
	if err != nil {
		return err
	}
	if err := d.c.DeleteInstance(ctx, id); err != nil && !client.IsNotFound(err) {
		return err
	}
	return nil
}

// DescribeLoadBalancer reads the load balancer named name. A listener's
// own targets and source ranges replace the load balancer's for that
// listener (minicloud's per-listener targets and source ranges): the
// backends are the targets some listener sends traffic to, and the source
// ranges are those every listener admits, an error when listeners admit
// different ones (the contract has one set per load balancer).
func (d *Driver) DescribeLoadBalancer(ctx context.Context, name string) (*conformance.LoadBalancer, error) {
	lbs, err := d.c.ListLoadBalancers(ctx, client.ListOptions{Name: name})
	if err != nil {
		return nil, fmt.Errorf("list load balancers named %s: %w", name, err)
	}
	if len(lbs) == 0 {
		return nil, nil
	}
	lb := lbs[0]
	ranges, ok := lb.AdmittedSources()
	if !ok {
		var each []string
		for _, l := range lb.Listeners {
			each = append(each, fmt.Sprintf("%s/%d %v", l.Protocol, l.Port, lb.SourcesOf(l)))
		}
		return nil, fmt.Errorf("load balancer %s: its listeners admit different sources: %s", name, strings.Join(each, ", "))
	}
	out := &conformance.LoadBalancer{Backends: []string{}, Ports: []conformance.Port{}, SourceRanges: ranges}
	d.mu.Lock()
	served := lb.ServedTargets()
	if len(lb.BackendPools) > 0 {
		// Its listeners serve its pools' members too, which only the
		// target health lists.
		served = nil
		for _, th := range lb.TargetHealth {
			served = append(served, th.Target)
		}
	}
	for _, t := range served {
		if n, ok := d.names[t.InstanceID]; ok {
			out.Backends = append(out.Backends, n)
		} else {
			out.Backends = append(out.Backends, t.InstanceID+t.IP)
		}
	}
	d.mu.Unlock()
	for _, l := range lb.Listeners {
		out.Ports = append(out.Ports, conformance.Port{Protocol: v1.Protocol(l.Protocol), Port: int32(l.Port), NodePort: int32(l.TargetPort)})
	}
	if hc := lb.HealthCheck; hc != nil {
		out.HealthCheck = &conformance.HealthCheck{Protocol: hc.Protocol, Port: int32(hc.Port), Path: hc.Path}
	}
	return out, nil
}

// Unsupported lists what docs/providers.md says the minicloud provider
// rejects.
func (d *Driver) Unsupported() []conformance.Unsupported {
	return []conformance.Unsupported{
		{Field: "spec.ports[0].protocol", Apply: func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }},
		{Field: "spec.loadBalancerIP", Apply: func(s *v1.Service) { s.Spec.LoadBalancerIP = "198.51.100.1" }},
		{Field: "spec.ports[0].nodePort", Apply: func(s *v1.Service) {
			f := false
			s.Spec.AllocateLoadBalancerNodePorts = &f
			s.Spec.Ports[0].NodePort = 0
		}},
	}
}

// DualStack is true: minicloud routes IPv6 CIDRs too.
func (d *Driver) DualStack() bool { return true }

// BreakCloud makes every API request but fault control answer 500.
func (d *Driver) BreakCloud(ctx context.Context) (func(context.Context) error, error) {
	if _, err := d.c.SetFaults(ctx, api.Faults{ErrorRate: 1}); err != nil {
		return nil, fmt.Errorf("set faults: %w", err)
	}
	return func(ctx context.Context) error {
		_, err := d.c.SetFaults(ctx, api.Faults{})
		return err
	}, nil
}

// ServeNodePort listens on each machine's private IP and nodePort, as
// kube-proxy would, answering each connection with the node name.
func (d *Driver) ServeNodePort(_ context.Context, machines []*conformance.Machine, nodePort int32) (func(), error) {
	return ServeNodePort(machines, nodePort)
}

// ServeNodePort serves TCP on each machine's first InternalIP and nodePort,
// answering each connection with the node name and a newline.
func ServeNodePort(machines []*conformance.Machine, nodePort int32) (func(), error) {
	var lns []net.Listener
	var wg sync.WaitGroup
	stop := func() {
		for _, ln := range lns {
			ln.Close()
		}
		wg.Wait()
	}
	for _, m := range machines {
		ip := firstInternalIP(m)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(nodePort))))
		if err != nil {
			stop()
			return nil, fmt.Errorf("listen on node %s's port %d: %w", m.Node.Name, nodePort, err)
		}
		lns = append(lns, ln)
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, name)
				c.Close()
			}
		}(m.Node.Name)
	}
	return stop, nil
}

func firstInternalIP(m *conformance.Machine) string {
	for _, a := range append(append([]v1.NodeAddress{}, m.Want.NodeAddresses...), m.Node.Status.Addresses...) {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// Reach connects to the ingress IP on port and returns the line the node
// answered.
func (d *Driver) Reach(ctx context.Context, ing v1.LoadBalancerIngress, port int32) (string, error) {
	return Reach(ctx, ing, port)
}

// Reach connects to the ingress IP on port and returns the first line the
// backend sent.
func Reach(ctx context.Context, ing v1.LoadBalancerIngress, port int32) (string, error) {
	host := ing.IP
	if host == "" {
		host = ing.Hostname
	}
	dl := net.Dialer{Timeout: 2 * time.Second}
	c, err := dl.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read from %s: %w", c.RemoteAddr(), err)
	}
	return strings.TrimSpace(line), nil
}

package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// ProviderType is the registered provider name of the manager's side of a
// plugin: `type: plugin` in --config (with a plugin block), or
// --cloud-provider=plugin with the plugin block's YAML as --cloud-config.
const ProviderType = "plugin"

func init() {
	cloudprovider.RegisterCloudProvider(ProviderType, func(config io.Reader) (cloudprovider.Interface, error) {
		cfg, err := ParseConfig(config)
		if err != nil {
			return nil, err
		}
		return Dial(context.Background(), cfg)
	})
}

// DefaultConnectTimeout is how long the manager waits at start-up for the
// plugin to answer its first GetCapabilities.
const DefaultConnectTimeout = time.Minute

// Config is the manager's side of a plugin: the plugin block of a provider in
// --config.
type Config struct {
	// Address is where the plugin listens: "unix:///path/to/socket", or
	// "host:port" over TCP, which needs TLS.
	Address string `json:"address"`
	// TLS is mutual TLS for a TCP address: the manager's certificate and
	// key, and the CA of the plugin's certificate.
	TLS *TLSConfig `json:"tls,omitempty"`
	// ConnectTimeout is how long start-up waits for the plugin (default
	// DefaultConnectTimeout).
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`
}

// FieldError is one problem with one field of a Config.
type FieldError struct {
	// Field is the field's path inside the plugin block, e.g. "tls.caFile".
	Field string
	// Message says what is wrong.
	Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate returns every problem of c, each naming its field.
func (c Config) Validate() []FieldError {
	var errs []FieldError
	network, _, err := parseAddress(c.Address)
	if err != nil {
		errs = append(errs, FieldError{"address", err.Error()})
	}
	if network == "tcp" && c.TLS == nil {
		errs = append(errs, FieldError{"tls", "required for a TCP address (the plugin API drives the cloud: mutual TLS only)"})
	}
	if c.TLS != nil {
		for _, f := range []struct{ name, value string }{{"tls.caFile", c.TLS.CAFile}, {"tls.certFile", c.TLS.CertFile}, {"tls.keyFile", c.TLS.KeyFile}} {
			if f.value == "" {
				errs = append(errs, FieldError{f.name, "required"})
			}
		}
	}
	if c.ConnectTimeout != nil && c.ConnectTimeout.Duration < 0 {
		errs = append(errs, FieldError{"connectTimeout", "must not be negative"})
	}
	return errs
}

// ParseConfig reads a Config from YAML or JSON (unknown keys are an error)
// and validates it.
func ParseConfig(r io.Reader) (Config, error) {
	if r == nil {
		return Config{}, errors.New("plugin: no configuration: give the provider a plugin block with its address")
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("plugin: read configuration: %w", err)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(bytes.TrimSpace(raw), &cfg); err != nil {
		return Config{}, fmt.Errorf("plugin: configuration: %w", err)
	}
	var errs []error
	for _, fe := range cfg.Validate() {
		errs = append(errs, fmt.Errorf("plugin: configuration: %w", fe))
	}
	return cfg, errors.Join(errs...)
}

// ErrUnavailable is wrapped by the errors of calls made while the plugin
// cannot be reached (down, restarting, re-checking its capabilities). They
// are transient (stratus.IsTransient): the cloud layer retries them, and a
// controller treats them like any cloud error, never as "not found".
var ErrUnavailable = errors.New("the plugin is unavailable")

// Client is the manager's side of a plugin: a cloudprovider.Interface whose
// calls go to the plugin process. Its capabilities are the plugin's, read
// when Dial connected; the cloud layer wraps it like any provider.
type Client struct {
	addr   string
	conn   *grpc.ClientConn
	rpc    pb.ProviderClient
	caps   *pb.Capabilities
	cancel context.CancelFunc
	done   chan struct{}

	v2     cloudprovider.InstancesV2
	inst   cloudprovider.Instances
	zones  cloudprovider.Zones
	lb     cloudprovider.LoadBalancer
	routes cloudprovider.Routes

	// lost counts lost connections; checked is the count up to which the
	// plugin's capabilities were checked again, and the result. A call made
	// after a reconnection checks first, so that a restarted plugin is never
	// used with capabilities it no longer has.
	lost    atomic.Uint64
	checked atomic.Pointer[capCheck]
	sem     chan struct{}
	closeMu sync.Once
}

type capCheck struct {
	lost uint64
	err  error
}

var _ cloudprovider.Interface = (*Client)(nil)

// Dial connects to the plugin at cfg.Address, waiting up to
// cfg.ConnectTimeout for it to answer GetCapabilities, and returns the
// provider it serves. It fails when the plugin speaks no protocol version
// this manager speaks, or its capabilities are inconsistent.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("plugin: configuration: %w", errs[0])
	}
	network, addr, _ := parseAddress(cfg.Address)
	creds := insecure.NewCredentials()
	target := "unix://" + addr
	if network == "tcp" {
		tlsCfg, err := cfg.TLS.clientConfig()
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", cfg.Address, err)
		}
		creds = credentials.NewTLS(tlsCfg)
		target = "passthrough:///" + addr
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
		// A restarted plugin is usually back within seconds: reconnect
		// quickly, and keep trying every few seconds.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", cfg.Address, err)
	}
	c := &Client{addr: cfg.Address, conn: conn, rpc: pb.NewProviderClient(conn), sem: make(chan struct{}, 1), done: make(chan struct{})}
	timeout := DefaultConnectTimeout
	if cfg.ConnectTimeout != nil && cfg.ConnectTimeout.Duration > 0 {
		timeout = cfg.ConnectTimeout.Duration
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	caps, err := c.capabilities(cctx, true)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("plugin %s: connect: %w", cfg.Address, err)
	}
	if err := checkCapabilities(caps); err != nil {
		conn.Close()
		return nil, fmt.Errorf("plugin %s: %w", cfg.Address, err)
	}
	c.caps = caps
	c.checked.Store(&capCheck{})
	c.assemble()
	mctx, mcancel := context.WithCancel(context.Background())
	c.cancel = mcancel
	go c.monitor(mctx)
	klog.InfoS("Connected to provider plugin", "address", cfg.Address, "provider", caps.GetProviderName(), "scheme", caps.GetProviderIdScheme(), "interfaces", caps.Interfaces, "extensions", caps.Extensions)
	return c, nil
}

// capabilities calls GetCapabilities; with wait, it waits for the plugin to
// be up (until ctx ends) instead of failing at once.
func (c *Client) capabilities(ctx context.Context, wait bool) (*pb.Capabilities, error) {
	caps, err := c.rpc.GetCapabilities(ctx, &pb.GetCapabilitiesRequest{ProtocolVersions: []uint32{ProtocolVersion}}, grpc.WaitForReady(wait))
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			return nil, fmt.Errorf("%w: version negotiation failed: %s", ErrProtocol, status.Convert(err).Message())
		}
		return nil, c.mapErr(ctx, "GetCapabilities", err)
	}
	return caps, nil
}

// checkCapabilities rejects capabilities the manager cannot use.
func checkCapabilities(caps *pb.Capabilities) error {
	switch {
	case caps.ProtocolVersion == nil:
		return protocolErr("GetCapabilities: the reply has no protocol_version")
	case caps.GetProtocolVersion() != ProtocolVersion:
		return protocolErr("GetCapabilities: the plugin chose protocol version %d; the manager speaks %d", caps.GetProtocolVersion(), ProtocolVersion)
	case caps.GetProviderIdScheme() == "":
		return protocolErr("GetCapabilities: the reply has no provider_id_scheme")
	case caps.HasClusterId == nil:
		return protocolErr("GetCapabilities: the reply has no has_cluster_id")
	}
	// Values this manager does not know come from a newer plugin of the
	// same protocol version (additions are compatible): they are not used.
	known := 0
	for _, i := range caps.Interfaces {
		if _, ok := pb.Interface_name[int32(i)]; ok && i != pb.Interface_INTERFACE_UNSPECIFIED {
			known++
		}
	}
	if known == 0 {
		return protocolErr("GetCapabilities: the plugin claims none of the interfaces INSTANCES_V2, INSTANCES, ZONES, LOAD_BALANCER and ROUTES")
	}
	has := func(i pb.Interface) bool { return slices.Contains(caps.Interfaces, i) }
	if has(pb.Interface_INTERFACE_ZONES) && !has(pb.Interface_INTERFACE_INSTANCES) && !has(pb.Interface_INTERFACE_INSTANCES_V2) {
		return protocolErr("GetCapabilities: interface ZONES without INSTANCES or INSTANCES_V2 (zones are only asked about nodes)")
	}
	for _, e := range caps.Extensions {
		switch e {
		case pb.Extension_EXTENSION_INSTANCE_LISTER, pb.Extension_EXTENSION_INSTANCE_WATCHER:
			if !has(pb.Interface_INTERFACE_INSTANCES_V2) {
				return protocolErr("GetCapabilities: extension %s without interface INSTANCES_V2", e)
			}
		case pb.Extension_EXTENSION_LOAD_BALANCER_LISTER, pb.Extension_EXTENSION_LOAD_BALANCER_VALIDATOR, pb.Extension_EXTENSION_BACKENDS_DIGESTER:
			if !has(pb.Interface_INTERFACE_LOAD_BALANCER) {
				return protocolErr("GetCapabilities: extension %s without interface LOAD_BALANCER", e)
			}
		}
	}
	if slices.Contains(caps.Extensions, pb.Extension_EXTENSION_BACKENDS_DIGESTER) && !slices.Contains(caps.Extensions, pb.Extension_EXTENSION_LOAD_BALANCER_LISTER) {
		return protocolErr("GetCapabilities: extension BACKENDS_DIGESTER without LOAD_BALANCER_LISTER")
	}
	if slices.Contains(caps.Extensions, pb.Extension_EXTENSION_INSTANCE_WATCHER) && !slices.Contains(caps.Extensions, pb.Extension_EXTENSION_INSTANCE_LISTER) {
		return protocolErr("GetCapabilities: extension INSTANCE_WATCHER without INSTANCE_LISTER")
	}
	return nil
}

// assemble builds the accessors' values from the capabilities, so that the
// cloud layer finds exactly the extensions the plugin claims.
func (c *Client) assemble() {
	hasExt := func(e pb.Extension) bool { return slices.Contains(c.caps.Extensions, e) }
	if slices.Contains(c.caps.Interfaces, pb.Interface_INTERFACE_INSTANCES_V2) {
		base := instancesV2{c}
		switch {
		case hasExt(pb.Extension_EXTENSION_INSTANCE_WATCHER):
			c.v2 = instanceWatcher{instanceLister{base}}
		case hasExt(pb.Extension_EXTENSION_INSTANCE_LISTER):
			c.v2 = instanceLister{base}
		default:
			c.v2 = base
		}
	}
	if slices.Contains(c.caps.Interfaces, pb.Interface_INTERFACE_LOAD_BALANCER) {
		if hasExt(pb.Extension_EXTENSION_LOAD_BALANCER_LISTER) {
			c.lb = loadBalancerLister{loadBalancer{c}}
		} else {
			c.lb = loadBalancer{c}
		}
	}
	if slices.Contains(c.caps.Interfaces, pb.Interface_INTERFACE_ROUTES) {
		c.routes = routes{c}
	}
	if slices.Contains(c.caps.Interfaces, pb.Interface_INTERFACE_INSTANCES) {
		c.inst = instancesV1{c}
	}
	if slices.Contains(c.caps.Interfaces, pb.Interface_INTERFACE_ZONES) {
		c.zones = zones{c}
	}
}

// monitor counts lost connections and reconnects at once (gRPC leaves an
// idle connection alone until the next call), until Close.
func (c *Client) monitor(ctx context.Context) {
	defer close(c.done)
	state := c.conn.GetState()
	for {
		if state == connectivity.Idle {
			c.conn.Connect()
		}
		if !c.conn.WaitForStateChange(ctx, state) {
			return
		}
		if state == connectivity.Ready {
			c.lost.Add(1)
			klog.InfoS("Lost the connection to the provider plugin; reconnecting", "address", c.addr)
		}
		state = c.conn.GetState()
	}
}

// ready checks the plugin's capabilities again after a reconnection, once for
// all callers. It returns an ErrUnavailable error while the plugin cannot be
// reached, and an ErrProtocol error when its capabilities changed.
func (c *Client) ready(ctx context.Context) error {
	lost := c.lost.Load()
	if chk := c.checked.Load(); chk.lost == lost {
		return chk.err
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return stratus.Transient(fmt.Errorf("plugin %s: waiting for its capabilities: %w: %w", c.addr, ErrUnavailable, ctx.Err()))
	}
	lost = c.lost.Load()
	if chk := c.checked.Load(); chk.lost == lost {
		return chk.err
	}
	caps, err := c.capabilities(ctx, false)
	if errors.Is(err, ErrProtocol) {
		err = fmt.Errorf("plugin %s: after reconnecting: %w", c.addr, err)
	} else if err != nil {
		return err
	}
	if err == nil && !proto.Equal(caps, c.caps) {
		err = fmt.Errorf("plugin %s: %w: its capabilities changed since the manager started (were {%s}, are {%s}); restart the manager to use them", c.addr, ErrProtocol, prototext.Format(c.caps), prototext.Format(caps))
	}
	if err != nil {
		klog.ErrorS(err, "Provider plugin unusable until the manager restarts", "address", c.addr)
	} else {
		klog.InfoS("Reconnected to provider plugin", "address", c.addr)
	}
	c.checked.Store(&capCheck{lost: lost, err: err})
	return err
}

// mapErr turns a failed call's gRPC status into the provider's error (its
// Error detail), a transient ErrUnavailable error (transport failures), or an
// ErrProtocol error (a method the plugin claims but does not implement).
func (c *Client) mapErr(ctx context.Context, method string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("plugin %s: %s: %w", c.addr, method, err)
	}
	for _, d := range st.Details() {
		if e, ok := d.(*pb.Error); ok {
			return fromError(e)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %s: %s: %w", c.addr, method, ctx.Err())
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return stratus.Transient(fmt.Errorf("plugin %s: %s: %w: %s", c.addr, method, ErrUnavailable, st.Message()))
	case codes.Unimplemented:
		return fmt.Errorf("plugin %s: %s: %w: the plugin claims the capability but does not implement the method: %s", c.addr, method, ErrProtocol, st.Message())
	default:
		return fmt.Errorf("plugin %s: %s: %w: %s: %s", c.addr, method, ErrProtocol, st.Code(), st.Message())
	}
}

// invoke makes one call after the capability check, mapping its error.
func invoke[T any](ctx context.Context, c *Client, method string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := c.ready(ctx); err != nil {
		return zero, err
	}
	v, err := fn(ctx)
	if err != nil {
		return zero, c.mapErr(ctx, method, err)
	}
	return v, nil
}

// missing is the error for a reply without a required field.
func (c *Client) missing(method, field string) error {
	return fmt.Errorf("plugin %s: %s: %w: the reply has no %s", c.addr, method, ErrProtocol, field)
}

// garbled is the error for a reply that does not decode.
func (c *Client) garbled(method string, err error) error {
	return fmt.Errorf("plugin %s: %s: %w: %w", c.addr, method, ErrProtocol, err)
}

// Connected reports whether the connection to the plugin is up now. While it
// is not, every call fails with ErrUnavailable; the client keeps reconnecting.
func (c *Client) Connected() bool { return c.conn.GetState() == connectivity.Ready }

// Close stops the connection to the plugin.
func (c *Client) Close() error {
	var err error
	c.closeMu.Do(func() {
		c.cancel()
		err = c.conn.Close()
		<-c.done
	})
	return err
}

// Capabilities returns what the plugin said it serves when Dial connected.
func (c *Client) Capabilities() *pb.Capabilities { return proto.CloneOf(c.caps) }

// Initialize closes the connection when stop closes. The plugin initializes
// its provider itself, with its own client builder.
func (c *Client) Initialize(_ cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	go func() {
		select {
		case <-stop:
			c.Close()
		case <-c.done:
		}
	}()
}

// LoadBalancer is the plugin's LoadBalancer, when it supports one.
func (c *Client) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.lb, c.lb != nil }

// Instances is the plugin's Instances (v1), when it supports them. The cloud
// layer uses them (with Zones) only when the plugin has no InstancesV2.
func (c *Client) Instances() (cloudprovider.Instances, bool) { return c.inst, c.inst != nil }

// InstancesV2 is the plugin's InstancesV2, when it supports one; it also
// implements stratus.InstanceLister and stratus.InstanceWatcher when the plugin does.
func (c *Client) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.v2, c.v2 != nil }

// Zones is the plugin's Zones, when it supports them.
func (c *Client) Zones() (cloudprovider.Zones, bool) { return c.zones, c.zones != nil }

// Clusters is not carried by the protocol.
func (c *Client) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is the plugin's Routes, when it supports them.
func (c *Client) Routes() (cloudprovider.Routes, bool) { return c.routes, c.routes != nil }

// ProviderName is the plugin provider's ProviderName(), the scheme of its
// provider IDs.
func (c *Client) ProviderName() string { return c.caps.GetProviderIdScheme() }

// HasClusterID is the plugin provider's HasClusterID().
func (c *Client) HasClusterID() bool { return c.caps.GetHasClusterId() }

type instancesV2 struct{ c *Client }

func (i instancesV2) request(node *v1.Node) (*pb.InstanceRequest, error) {
	b, err := encodeNode(node)
	if err != nil {
		return nil, err
	}
	return &pb.InstanceRequest{Node: b}, nil
}

func (i instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	req, err := i.request(node)
	if err != nil {
		return false, err
	}
	resp, err := invoke(ctx, i.c, "InstanceExists", func(ctx context.Context) (*pb.InstanceExistsResponse, error) {
		return i.c.rpc.InstanceExists(ctx, req)
	})
	if err != nil {
		return false, err
	}
	if resp.Exists == nil {
		return false, i.c.missing("InstanceExists", "exists")
	}
	return resp.GetExists(), nil
}

func (i instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	req, err := i.request(node)
	if err != nil {
		return false, err
	}
	resp, err := invoke(ctx, i.c, "InstanceShutdown", func(ctx context.Context) (*pb.InstanceShutdownResponse, error) {
		return i.c.rpc.InstanceShutdown(ctx, req)
	})
	if err != nil {
		return false, err
	}
	if resp.Shutdown == nil {
		return false, i.c.missing("InstanceShutdown", "shutdown")
	}
	return resp.GetShutdown(), nil
}

func (i instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	req, err := i.request(node)
	if err != nil {
		return nil, err
	}
	resp, err := invoke(ctx, i.c, "InstanceMetadata", func(ctx context.Context) (*pb.InstanceMetadataResponse, error) {
		return i.c.rpc.InstanceMetadata(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	md, err := fromMetadata("metadata", resp.Metadata)
	if err != nil {
		return nil, i.c.garbled("InstanceMetadata", err)
	}
	return md, nil
}

type instanceLister struct{ instancesV2 }

// ListInstances is stratus.InstanceLister: a failed call is an error, never an
// empty listing.
func (l instanceLister) ListInstances(ctx context.Context) ([]stratus.Instance, error) {
	resp, err := invoke(ctx, l.c, "ListInstances", func(ctx context.Context) (*pb.ListInstancesResponse, error) {
		return l.c.rpc.ListInstances(ctx, &pb.ListInstancesRequest{})
	})
	if err != nil {
		return nil, err
	}
	out := make([]stratus.Instance, 0, len(resp.Instances))
	for i, in := range resp.Instances {
		inst, err := fromInstance(fmt.Sprintf("instances[%d]", i), in)
		if err != nil {
			return nil, l.c.garbled("ListInstances", err)
		}
		out = append(out, inst)
	}
	return out, nil
}

type instanceWatcher struct{ instanceLister }

// WatchInstances is stratus.InstanceWatcher. It calls changed for every message
// of the plugin's stream and when the stream breaks (what was listed may be
// out of date), and returns the stream's error; nil only when ctx ended.
func (w instanceWatcher) WatchInstances(ctx context.Context, changed func()) error {
	stream, err := invoke(ctx, w.c, "WatchInstances", func(ctx context.Context) (pb.Provider_WatchInstancesClient, error) {
		return w.c.rpc.WatchInstances(ctx, &pb.WatchInstancesRequest{})
	})
	if err != nil {
		return err
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			changed()
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		changed()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("plugin %s: WatchInstances: the plugin ended the watch", w.c.addr)
		}
		return w.c.mapErr(ctx, "WatchInstances", err)
	}
}

type loadBalancer struct{ c *Client }

func (l loadBalancer) request(clusterName string, svc *v1.Service) (*pb.LoadBalancerRequest, error) {
	b, err := encodeService(svc)
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerRequest{ClusterName: proto.String(clusterName), Service: b}, nil
}

func (l loadBalancer) nodesRequest(clusterName string, svc *v1.Service, nodes []*v1.Node) (*pb.LoadBalancerNodesRequest, error) {
	b, err := encodeService(svc)
	if err != nil {
		return nil, err
	}
	ns, err := encodeNodes(nodes)
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerNodesRequest{ClusterName: proto.String(clusterName), Service: b, Nodes: ns}, nil
}

func (l loadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	req, err := l.request(clusterName, svc)
	if err != nil {
		return nil, false, err
	}
	resp, err := invoke(ctx, l.c, "GetLoadBalancer", func(ctx context.Context) (*pb.GetLoadBalancerResponse, error) {
		return l.c.rpc.GetLoadBalancer(ctx, req)
	})
	if err != nil {
		return nil, false, err
	}
	if resp.Exists == nil {
		return nil, false, l.c.missing("GetLoadBalancer", "exists")
	}
	st, err := decodeStatus("status", resp.Status)
	if err != nil {
		return nil, false, l.c.garbled("GetLoadBalancer", err)
	}
	return st, resp.GetExists(), nil
}

// GetLoadBalancerName asks the plugin; the interface has no error, so a
// failed call yields "" (callers treat an empty name as unknown).
func (l loadBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, svc *v1.Service) string {
	req, err := l.request(clusterName, svc)
	if err != nil {
		klog.ErrorS(err, "GetLoadBalancerName", "service", klog.KObj(svc))
		return ""
	}
	resp, err := invoke(ctx, l.c, "GetLoadBalancerName", func(ctx context.Context) (*pb.GetLoadBalancerNameResponse, error) {
		return l.c.rpc.GetLoadBalancerName(ctx, req)
	})
	if err == nil && resp.Name == nil {
		err = l.c.missing("GetLoadBalancerName", "name")
	}
	if err != nil {
		klog.ErrorS(err, "GetLoadBalancerName", "service", klog.KObj(svc))
		return ""
	}
	return resp.GetName()
}

func (l loadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	req, err := l.nodesRequest(clusterName, svc, nodes)
	if err != nil {
		return nil, err
	}
	if stratus.LoadBalancerAbsent(ctx) {
		req.LoadBalancerAbsent = proto.Bool(true)
	}
	resp, err := invoke(ctx, l.c, "EnsureLoadBalancer", func(ctx context.Context) (*pb.EnsureLoadBalancerResponse, error) {
		return l.c.rpc.EnsureLoadBalancer(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	st, err := decodeStatus("status", resp.Status)
	if err != nil {
		return nil, l.c.garbled("EnsureLoadBalancer", err)
	}
	return st, nil
}

func (l loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	req, err := l.nodesRequest(clusterName, svc, nodes)
	if err != nil {
		return err
	}
	_, err = invoke(ctx, l.c, "UpdateLoadBalancer", func(ctx context.Context) (*pb.UpdateLoadBalancerResponse, error) {
		return l.c.rpc.UpdateLoadBalancer(ctx, req)
	})
	return err
}

func (l loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	req, err := l.request(clusterName, svc)
	if err != nil {
		return err
	}
	_, err = invoke(ctx, l.c, "EnsureLoadBalancerDeleted", func(ctx context.Context) (*pb.EnsureLoadBalancerDeletedResponse, error) {
		return l.c.rpc.EnsureLoadBalancerDeleted(ctx, req)
	})
	return err
}

type loadBalancerLister struct{ loadBalancer }

// ListLoadBalancers is stratus.LoadBalancerLister: a failed call is an error,
// never an empty listing.
func (l loadBalancerLister) ListLoadBalancers(ctx context.Context, clusterName string) ([]stratus.LoadBalancerRef, error) {
	resp, err := invoke(ctx, l.c, "ListLoadBalancers", func(ctx context.Context) (*pb.ListLoadBalancersResponse, error) {
		return l.c.rpc.ListLoadBalancers(ctx, &pb.ListLoadBalancersRequest{ClusterName: proto.String(clusterName)})
	})
	if err != nil {
		return nil, err
	}
	out := make([]stratus.LoadBalancerRef, 0, len(resp.LoadBalancers))
	for i, r := range resp.LoadBalancers {
		ref, err := fromLoadBalancerRef(fmt.Sprintf("load_balancers[%d]", i), r)
		if err != nil {
			return nil, l.c.garbled("ListLoadBalancers", err)
		}
		out = append(out, ref)
	}
	return out, nil
}

type routes struct{ c *Client }

func (r routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	resp, err := invoke(ctx, r.c, "ListRoutes", func(ctx context.Context) (*pb.ListRoutesResponse, error) {
		return r.c.rpc.ListRoutes(ctx, &pb.ListRoutesRequest{ClusterName: proto.String(clusterName)})
	})
	if err != nil {
		return nil, err
	}
	out := make([]*cloudprovider.Route, 0, len(resp.Routes))
	for i, route := range resp.Routes {
		rt, err := fromRoute(fmt.Sprintf("routes[%d]", i), route)
		if err != nil {
			return nil, r.c.garbled("ListRoutes", err)
		}
		out = append(out, rt)
	}
	return out, nil
}

func (r routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	_, err := invoke(ctx, r.c, "CreateRoute", func(ctx context.Context) (*pb.CreateRouteResponse, error) {
		return r.c.rpc.CreateRoute(ctx, &pb.CreateRouteRequest{ClusterName: proto.String(clusterName), NameHint: proto.String(nameHint), Route: toRoute(route)})
	})
	return err
}

func (r routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	_, err := invoke(ctx, r.c, "DeleteRoute", func(ctx context.Context) (*pb.DeleteRouteResponse, error) {
		return r.c.rpc.DeleteRoute(ctx, &pb.DeleteRouteRequest{ClusterName: proto.String(clusterName), Route: toRoute(route)})
	})
	return err
}

package plugin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// ServeOptions configures Serve.
type ServeOptions struct {
	// Address is where to listen: "unix:///path/to/socket" or, with TLS,
	// "host:port" for TCP. Ignored when Listener is set.
	Address string
	// TLS is required for TCP: the plugin's certificate and key, and CAFile,
	// the CA that client (manager) certificates must chain to (mutual TLS).
	TLS *TLSConfig
	// Listener, when set, is served instead of listening on Address (it is
	// closed when Serve returns). TLS still applies.
	Listener net.Listener
	// ProviderName is the provider's registered name, reported in the
	// capabilities for logs. Default: the provider's ProviderName().
	ProviderName string
	// ClientBuilder is handed to the provider's Initialize (providers that
	// read Kubernetes objects need it). May be nil.
	ClientBuilder cloudprovider.ControllerClientBuilder
}

// gracefulStop bounds how long Serve waits for calls in flight when ctx ends.
const gracefulStop = 10 * time.Second

// Serve serves provider over the provider protocol until ctx ends: it calls
// the provider's Initialize (with opts.ClientBuilder and ctx's end as the
// stop channel), listens on opts.Address and answers the manager's calls.
// Any cloudprovider.Interface works; its InstancesV2, Instances (v1), Zones,
// LoadBalancer and Routes and the pkg/stratus extensions are served.
// It returns nil when ctx ended, or the error that stopped it.
func Serve(ctx context.Context, provider cloudprovider.Interface, opts ServeOptions) error {
	if provider == nil {
		return errors.New("plugin: serve: provider is nil")
	}
	caps := capabilitiesOf(provider, opts.ProviderName)
	if len(caps.Interfaces) == 0 {
		return fmt.Errorf("plugin: serve provider %q: it supports none of InstancesV2, Instances, LoadBalancer and Routes", caps.GetProviderName())
	}
	var serverOpts []grpc.ServerOption
	if opts.TLS != nil {
		cfg, err := opts.TLS.serverConfig()
		if err != nil {
			return fmt.Errorf("plugin: serve: %w", err)
		}
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	lis := opts.Listener
	if lis == nil {
		var err error
		if lis, err = listen(opts.Address, opts.TLS != nil); err != nil {
			return fmt.Errorf("plugin: serve: %w", err)
		}
	}
	serverOpts = append(serverOpts, grpc.MaxRecvMsgSize(maxMessageSize), grpc.MaxSendMsgSize(maxMessageSize))
	srv := grpc.NewServer(serverOpts...)
	pb.RegisterProviderServer(srv, &server{p: provider, caps: caps})

	provider.Initialize(opts.ClientBuilder, ctx.Done())
	if err := startInformers(ctx, provider, opts.ClientBuilder); err != nil {
		return fmt.Errorf("plugin: serve provider %q: %w", caps.GetProviderName(), err)
	}
	klog.InfoS("Serving provider plugin", "provider", caps.GetProviderName(), "address", lis.Addr().String(), "interfaces", caps.Interfaces, "extensions", caps.Extensions)

	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("plugin: serve: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(gracefulStop)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		srv.Stop()
	}
	return nil
}

// informersResync is the resync period of the informers handed to a provider
// that asks for them: upstream's default --min-resync-period.
const informersResync = 12 * time.Hour

// startInformers hands a provider that reads Kubernetes objects through shared
// informers (cloudprovider.InformerUser) a factory, as a manager does in
// process, and starts it until ctx ends. Without a ClientBuilder it logs that
// the provider gets none: such providers may then fail the calls that need them.
func startInformers(ctx context.Context, provider cloudprovider.Interface, builder cloudprovider.ControllerClientBuilder) error {
	user, ok := provider.(cloudprovider.InformerUser)
	if !ok {
		return nil
	}
	if builder == nil {
		klog.InfoS("Provider reads Kubernetes objects through informers but no Kubernetes client was given (stratus-ccm plugin serve --kubeconfig); calls that need them may fail")
		return nil
	}
	client, err := builder.Client("shared-informers")
	if err != nil {
		return fmt.Errorf("shared informers client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, informersResync)
	user.SetInformers(factory)
	factory.Start(ctx.Done())
	return nil
}

// listen listens on a plugin address. A stale socket file of an earlier run
// is removed first; plain TCP is refused.
func listen(address string, withTLS bool) (net.Listener, error) {
	network, addr, err := parseAddress(address)
	if err != nil {
		return nil, err
	}
	if network == "tcp" && !withTLS {
		return nil, fmt.Errorf("address %q: TCP needs TLS (a certificate, key and client CA)", address)
	}
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if err := os.Remove(addr); err != nil {
				return nil, fmt.Errorf("remove stale socket %s: %w", addr, err)
			}
		}
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", address, err)
	}
	if network == "unix" {
		// Only the owner (and its group, for a sidecar sharing a volume) may
		// drive the provider.
		if err := os.Chmod(addr, 0o660); err != nil {
			lis.Close()
			return nil, fmt.Errorf("restrict socket %s: %w", addr, err)
		}
	}
	return lis, nil
}

// parseAddress splits "unix:///path" or "host:port" into a network and an
// address.
func parseAddress(address string) (network, addr string, err error) {
	switch {
	case address == "":
		return "", "", errors.New("required")
	case strings.HasPrefix(address, "unix://"):
		path := strings.TrimPrefix(address, "unix://")
		if !strings.HasPrefix(path, "/") {
			return "", "", fmt.Errorf("%q: a unix address is unix:///absolute/path", address)
		}
		return "unix", path, nil
	case strings.Contains(address, "://"):
		return "", "", fmt.Errorf("%q: must be unix:///path or host:port", address)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil || port == "" {
		return "", "", fmt.Errorf("%q: must be unix:///path or host:port", address)
	}
	return "tcp", net.JoinHostPort(host, port), nil
}

// capabilitiesOf finds what provider supports, the way the cloud layer does
// for an in-process provider.
func capabilitiesOf(p cloudprovider.Interface, name string) *pb.Capabilities {
	if name == "" {
		name = p.ProviderName()
	}
	caps := &pb.Capabilities{
		ProtocolVersion:  proto.Uint32(ProtocolVersion),
		ProviderName:     proto.String(name),
		ProviderIdScheme: proto.String(p.ProviderName()),
		HasClusterId:     proto.Bool(p.HasClusterID()),
	}
	if v2, ok := p.InstancesV2(); ok && v2 != nil {
		caps.Interfaces = append(caps.Interfaces, pb.Interface_INTERFACE_INSTANCES_V2)
		lister, isLister := p.(stratus.InstanceLister)
		if !isLister {
			lister, isLister = v2.(stratus.InstanceLister)
		}
		if isLister {
			caps.Extensions = append(caps.Extensions, pb.Extension_EXTENSION_INSTANCE_LISTER)
			if _, ok := lister.(stratus.InstanceWatcher); ok {
				caps.Extensions = append(caps.Extensions, pb.Extension_EXTENSION_INSTANCE_WATCHER)
			}
		}
	}
	if lb, ok := p.LoadBalancer(); ok && lb != nil {
		caps.Interfaces = append(caps.Interfaces, pb.Interface_INTERFACE_LOAD_BALANCER)
		_, isLister := p.(stratus.LoadBalancerLister)
		if !isLister {
			_, isLister = lb.(stratus.LoadBalancerLister)
		}
		if isLister {
			caps.Extensions = append(caps.Extensions, pb.Extension_EXTENSION_LOAD_BALANCER_LISTER)
		}
		addLoadBalancerValidation(p, caps)
		addBackendsDigests(p, caps)
	}
	if r, ok := p.Routes(); ok && r != nil {
		caps.Interfaces = append(caps.Interfaces, pb.Interface_INTERFACE_ROUTES)
	}
	if inst, ok := p.Instances(); ok && inst != nil {
		caps.Interfaces = append(caps.Interfaces, pb.Interface_INTERFACE_INSTANCES)
	}
	// Zones are only asked about nodes: without Instances of either kind
	// the manager has no use for them.
	if z, ok := p.Zones(); ok && z != nil && (slices.Contains(caps.Interfaces, pb.Interface_INTERFACE_INSTANCES) || slices.Contains(caps.Interfaces, pb.Interface_INTERFACE_INSTANCES_V2)) {
		caps.Interfaces = append(caps.Interfaces, pb.Interface_INTERFACE_ZONES)
	}
	return caps
}

// server answers the protocol's calls with the provider's.
type server struct {
	pb.UnimplementedProviderServer
	p    cloudprovider.Interface
	caps *pb.Capabilities
}

func (s *server) GetCapabilities(_ context.Context, req *pb.GetCapabilitiesRequest) (*pb.Capabilities, error) {
	if !slices.Contains(req.ProtocolVersions, ProtocolVersion) {
		return nil, status.Errorf(codes.FailedPrecondition, "the plugin speaks protocol version %d; the manager speaks %v", ProtocolVersion, req.ProtocolVersions)
	}
	return s.caps, nil
}

// serve is the one shape of the plugin's side of a provider call: get
// finds the interface the call needs (an Unimplemented status without it),
// decode reads the request (an InvalidArgument status for a bad one), and
// do calls the provider and builds the response; do's error is the
// provider's, given to the manager through toStatus.
func serve[I, In, R any](get func() (I, error), decode func() (In, error), do func(I, In) (R, error)) (R, error) {
	var zero R
	i, err := get()
	if err != nil {
		return zero, err
	}
	in, err := decode()
	if err != nil {
		return zero, err
	}
	r, err := do(i, in)
	if err != nil {
		return zero, toStatus(err)
	}
	return r, nil
}

// noRequest is the decode of a call whose request carries nothing.
func noRequest() (struct{}, error) { return struct{}{}, nil }

// clusterOf is the decode of a request that names its cluster.
func clusterOf(name *string) func() (string, error) { return requiredOf("cluster_name", name) }

func (s *server) instancesV2() (cloudprovider.InstancesV2, error) {
	if v2, ok := s.p.InstancesV2(); ok && v2 != nil {
		return v2, nil
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not support InstancesV2")
}

func invalid(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }

func decodeNode(b []byte) (*v1.Node, error) {
	n := &v1.Node{}
	if err := decodeObject("node", b, n); err != nil {
		return nil, invalid(err)
	}
	return n, nil
}

// nodeOf is the decode of a request that carries a Node.
func nodeOf(b []byte) func() (*v1.Node, error) {
	return func() (*v1.Node, error) { return decodeNode(b) }
}

func (s *server) InstanceExists(ctx context.Context, req *pb.InstanceRequest) (*pb.InstanceExistsResponse, error) {
	return serve(s.instancesV2, nodeOf(req.Node), func(v2 cloudprovider.InstancesV2, node *v1.Node) (*pb.InstanceExistsResponse, error) {
		exists, err := v2.InstanceExists(ctx, node)
		return &pb.InstanceExistsResponse{Exists: proto.Bool(exists)}, err
	})
}

func (s *server) InstanceShutdown(ctx context.Context, req *pb.InstanceRequest) (*pb.InstanceShutdownResponse, error) {
	return serve(s.instancesV2, nodeOf(req.Node), func(v2 cloudprovider.InstancesV2, node *v1.Node) (*pb.InstanceShutdownResponse, error) {
		down, err := v2.InstanceShutdown(ctx, node)
		return &pb.InstanceShutdownResponse{Shutdown: proto.Bool(down)}, err
	})
}

func (s *server) InstanceMetadata(ctx context.Context, req *pb.InstanceRequest) (*pb.InstanceMetadataResponse, error) {
	return serve(s.instancesV2, nodeOf(req.Node), func(v2 cloudprovider.InstancesV2, node *v1.Node) (*pb.InstanceMetadataResponse, error) {
		md, err := v2.InstanceMetadata(ctx, node)
		if err != nil {
			return nil, err
		}
		return &pb.InstanceMetadataResponse{Metadata: toMetadata(md)}, nil
	})
}

func (s *server) instanceLister() (stratus.InstanceLister, error) {
	if l, ok := s.p.(stratus.InstanceLister); ok {
		return l, nil
	}
	if v2, ok := s.p.InstancesV2(); ok && v2 != nil {
		if l, ok := v2.(stratus.InstanceLister); ok {
			return l, nil
		}
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not list instances")
}

func (s *server) ListInstances(ctx context.Context, _ *pb.ListInstancesRequest) (*pb.ListInstancesResponse, error) {
	return serve(s.instanceLister, noRequest, func(l stratus.InstanceLister, _ struct{}) (*pb.ListInstancesResponse, error) {
		list, err := l.ListInstances(ctx)
		if err != nil {
			return nil, err
		}
		resp := &pb.ListInstancesResponse{Instances: make([]*pb.Instance, 0, len(list))}
		for _, in := range list {
			resp.Instances = append(resp.Instances, toInstance(in))
		}
		return resp, nil
	})
}

func (s *server) WatchInstances(_ *pb.WatchInstancesRequest, stream pb.Provider_WatchInstancesServer) error {
	l, err := s.instanceLister()
	if err != nil {
		return err
	}
	w, ok := l.(stratus.InstanceWatcher)
	if !ok {
		return status.Error(codes.Unimplemented, "the provider does not watch instances")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	// changed must not block, so notifications are coalesced into one
	// pending signal that a single sender drains.
	pending := make(chan struct{}, 1)
	notify := func() {
		select {
		case pending <- struct{}{}:
		default:
		}
	}
	// The first message goes at once: whatever the manager listed before
	// this (re)connection may be out of date.
	notify()
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-pending:
				if err := stream.Send(&pb.InstancesChanged{}); err != nil {
					sendErr <- err
					cancel()
					return
				}
			}
		}
	}()
	err = w.WatchInstances(ctx, notify)
	cancel()
	select {
	case serr := <-sendErr:
		return serr
	default:
	}
	if err != nil {
		return toStatus(err)
	}
	return nil
}

func (s *server) loadBalancer() (cloudprovider.LoadBalancer, error) {
	if lb, ok := s.p.LoadBalancer(); ok && lb != nil {
		return lb, nil
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not support LoadBalancer")
}

// lbRequest is what a load-balancer call's request carries.
type lbRequest struct {
	cluster string
	svc     *v1.Service
	nodes   []*v1.Node
}

func decodeLBRequest(clusterName *string, svcJSON []byte, nodesJSON [][]byte) (*v1.Service, []*v1.Node, error) {
	if clusterName == nil {
		return nil, nil, invalid(errors.New("cluster_name: required"))
	}
	svc := &v1.Service{}
	if err := decodeObject("service", svcJSON, svc); err != nil {
		return nil, nil, invalid(err)
	}
	nodes := make([]*v1.Node, 0, len(nodesJSON))
	for i, b := range nodesJSON {
		n := &v1.Node{}
		if err := decodeObject(fmt.Sprintf("nodes[%d]", i), b, n); err != nil {
			return nil, nil, invalid(err)
		}
		nodes = append(nodes, n)
	}
	return svc, nodes, nil
}

// lbRequestOf is the decode of a load-balancer call's request: the
// cluster, the Service and, for Ensure and Update, the Nodes.
func lbRequestOf(clusterName *string, svcJSON []byte, nodesJSON [][]byte) func() (lbRequest, error) {
	return func() (lbRequest, error) {
		svc, nodes, err := decodeLBRequest(clusterName, svcJSON, nodesJSON)
		if err != nil {
			return lbRequest{}, err
		}
		return lbRequest{cluster: *clusterName, svc: svc, nodes: nodes}, nil
	}
}

// lbStatusOf encodes the load-balancer status of a response.
func lbStatusOf(st *v1.LoadBalancerStatus) ([]byte, error) {
	b, err := encodeStatus(st)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode load-balancer status: %v", err)
	}
	return b, nil
}

func (s *server) GetLoadBalancer(ctx context.Context, req *pb.LoadBalancerRequest) (*pb.GetLoadBalancerResponse, error) {
	var exists bool
	st, err := serve(s.loadBalancer, lbRequestOf(req.ClusterName, req.Service, nil), func(lb cloudprovider.LoadBalancer, in lbRequest) (st *v1.LoadBalancerStatus, err error) {
		st, exists, err = lb.GetLoadBalancer(ctx, in.cluster, in.svc)
		return st, err
	})
	if err != nil {
		return nil, err
	}
	b, err := lbStatusOf(st)
	if err != nil {
		return nil, err
	}
	return &pb.GetLoadBalancerResponse{Exists: proto.Bool(exists), Status: b}, nil
}

func (s *server) GetLoadBalancerName(ctx context.Context, req *pb.LoadBalancerRequest) (*pb.GetLoadBalancerNameResponse, error) {
	return serve(s.loadBalancer, lbRequestOf(req.ClusterName, req.Service, nil), func(lb cloudprovider.LoadBalancer, in lbRequest) (*pb.GetLoadBalancerNameResponse, error) {
		return &pb.GetLoadBalancerNameResponse{Name: proto.String(lb.GetLoadBalancerName(ctx, in.cluster, in.svc))}, nil
	})
}

func (s *server) EnsureLoadBalancer(ctx context.Context, req *pb.LoadBalancerNodesRequest) (*pb.EnsureLoadBalancerResponse, error) {
	if req.GetLoadBalancerAbsent() {
		ctx = stratus.WithLoadBalancerAbsent(ctx)
	}
	st, err := serve(s.loadBalancer, lbRequestOf(req.ClusterName, req.Service, req.Nodes), func(lb cloudprovider.LoadBalancer, in lbRequest) (*v1.LoadBalancerStatus, error) {
		return lb.EnsureLoadBalancer(ctx, in.cluster, in.svc, in.nodes)
	})
	if err != nil {
		return nil, err
	}
	b, err := lbStatusOf(st)
	if err != nil {
		return nil, err
	}
	return &pb.EnsureLoadBalancerResponse{Status: b}, nil
}

func (s *server) UpdateLoadBalancer(ctx context.Context, req *pb.LoadBalancerNodesRequest) (*pb.UpdateLoadBalancerResponse, error) {
	return serve(s.loadBalancer, lbRequestOf(req.ClusterName, req.Service, req.Nodes), func(lb cloudprovider.LoadBalancer, in lbRequest) (*pb.UpdateLoadBalancerResponse, error) {
		return &pb.UpdateLoadBalancerResponse{}, lb.UpdateLoadBalancer(ctx, in.cluster, in.svc, in.nodes)
	})
}

func (s *server) EnsureLoadBalancerDeleted(ctx context.Context, req *pb.LoadBalancerRequest) (*pb.EnsureLoadBalancerDeletedResponse, error) {
	return serve(s.loadBalancer, lbRequestOf(req.ClusterName, req.Service, nil), func(lb cloudprovider.LoadBalancer, in lbRequest) (*pb.EnsureLoadBalancerDeletedResponse, error) {
		return &pb.EnsureLoadBalancerDeletedResponse{}, lb.EnsureLoadBalancerDeleted(ctx, in.cluster, in.svc)
	})
}

func (s *server) loadBalancerLister() (stratus.LoadBalancerLister, error) {
	if l, ok := lbExtension[stratus.LoadBalancerLister](s.p); ok {
		return l, nil
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not list load balancers")
}

func (s *server) ListLoadBalancers(ctx context.Context, req *pb.ListLoadBalancersRequest) (*pb.ListLoadBalancersResponse, error) {
	// The cluster is checked before the provider's support, unlike the
	// other calls.
	cluster, err := clusterOf(req.ClusterName)()
	if err != nil {
		return nil, err
	}
	refs, err := serve(s.loadBalancerLister, noRequest, func(l stratus.LoadBalancerLister, _ struct{}) ([]stratus.LoadBalancerRef, error) {
		return l.ListLoadBalancers(ctx, cluster)
	})
	if err != nil {
		return nil, err
	}
	resp := &pb.ListLoadBalancersResponse{LoadBalancers: make([]*pb.LoadBalancerRef, 0, len(refs))}
	for _, r := range refs {
		ref, err := toLoadBalancerRef(r)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.LoadBalancers = append(resp.LoadBalancers, ref)
	}
	return resp, nil
}

func (s *server) routes() (cloudprovider.Routes, error) {
	if r, ok := s.p.Routes(); ok && r != nil {
		return r, nil
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not support Routes")
}

func (s *server) ListRoutes(ctx context.Context, req *pb.ListRoutesRequest) (*pb.ListRoutesResponse, error) {
	return serve(s.routes, clusterOf(req.ClusterName), func(r cloudprovider.Routes, cluster string) (*pb.ListRoutesResponse, error) {
		list, err := r.ListRoutes(ctx, cluster)
		if err != nil {
			return nil, err
		}
		resp := &pb.ListRoutesResponse{Routes: make([]*pb.Route, 0, len(list))}
		for _, route := range list {
			if route != nil {
				resp.Routes = append(resp.Routes, toRoute(route))
			}
		}
		return resp, nil
	})
}

// routeOf is the decode of a route call's request: its route, when the
// fields the call requires are set.
func routeOf(r *pb.Route, set bool, fields string) func() (*cloudprovider.Route, error) {
	return func() (*cloudprovider.Route, error) {
		if !set {
			return nil, invalid(errors.New(fields + ": required"))
		}
		route, err := fromRoute("route", r)
		if err != nil {
			return nil, invalid(err)
		}
		return route, nil
	}
}

func (s *server) CreateRoute(ctx context.Context, req *pb.CreateRouteRequest) (*pb.CreateRouteResponse, error) {
	decode := routeOf(req.Route, req.ClusterName != nil && req.NameHint != nil, "cluster_name and name_hint")
	return serve(s.routes, decode, func(r cloudprovider.Routes, route *cloudprovider.Route) (*pb.CreateRouteResponse, error) {
		return &pb.CreateRouteResponse{}, r.CreateRoute(ctx, req.GetClusterName(), req.GetNameHint(), route)
	})
}

func (s *server) DeleteRoute(ctx context.Context, req *pb.DeleteRouteRequest) (*pb.DeleteRouteResponse, error) {
	decode := routeOf(req.Route, req.ClusterName != nil, "cluster_name")
	return serve(s.routes, decode, func(r cloudprovider.Routes, route *cloudprovider.Route) (*pb.DeleteRouteResponse, error) {
		return &pb.DeleteRouteResponse{}, r.DeleteRoute(ctx, req.GetClusterName(), route)
	})
}

// TLSConfig names the files of mutual TLS. On the plugin's side (Serve),
// CertFile and KeyFile are the plugin's identity and CAFile the CA of
// accepted manager certificates; on the manager's side (the plugin block of
// --config), CertFile and KeyFile are the manager's identity and CAFile the
// CA of the plugin's certificate. Files are read when the connection is set
// up.
type TLSConfig struct {
	// CAFile is the PEM file of the CA that the peer's certificate must chain to.
	CAFile string `json:"caFile"`
	// CertFile is the PEM file of this side's certificate.
	CertFile string `json:"certFile"`
	// KeyFile is the PEM file of this side's private key.
	KeyFile string `json:"keyFile"`
	// ServerName overrides the name the manager expects in the plugin's
	// certificate (default: the host of the address). Manager's side only.
	ServerName string `json:"serverName,omitempty"`
}

func (t *TLSConfig) load() (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load TLS certificate %s and key %s: %w", t.CertFile, t.KeyFile, err)
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("read TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return tls.Certificate{}, nil, fmt.Errorf("TLS CA %s: no PEM certificate", t.CAFile)
	}
	return cert, pool, nil
}

func (t *TLSConfig) serverConfig() (*tls.Config, error) {
	cert, pool, err := t.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

func (t *TLSConfig) clientConfig() (*tls.Config, error) {
	cert, pool, err := t.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   t.ServerName,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

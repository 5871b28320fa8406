package plugin_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/plugin"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// serve runs provider as a plugin on socket until the returned stop is
// called (or the test ends).
func serve(t *testing.T, provider cloudprovider.Interface, opts plugin.ServeOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- plugin.Serve(ctx, provider, opts) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func socket(t *testing.T) string {
	dir, err := os.MkdirTemp("", "plugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return "unix://" + filepath.Join(dir, "p.sock")
}

func dial(t *testing.T, cfg plugin.Config) *plugin.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", cfg.Address, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func node(name, providerID string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

// The minicloud provider as a plugin answers as it does in process: its
// capabilities, metadata, "gone", listings, RetryError while a load balancer
// provisions, and throttling from the cloud.
func TestMinicloudAsPlugin(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: time.Hour, NoDataPlane: true})
	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "n1", Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	addr := socket(t)
	serve(t, mcprovider.NewFromClient(mc.Client), plugin.ServeOptions{Address: addr, ProviderName: "minicloud"})
	c := dial(t, plugin.Config{Address: addr})

	caps := c.Capabilities()
	if caps.GetProviderIdScheme() != "minicloud" || caps.GetProviderName() != "minicloud" || len(caps.Interfaces) != 3 ||
		!proto.Equal(&pb.Capabilities{Extensions: caps.Extensions}, &pb.Capabilities{Extensions: []pb.Extension{pb.Extension_EXTENSION_INSTANCE_LISTER, pb.Extension_EXTENSION_LOAD_BALANCER_LISTER, pb.Extension_EXTENSION_LOAD_BALANCER_VALIDATOR, pb.Extension_EXTENSION_BACKENDS_DIGESTER}}) {
		t.Errorf("capabilities %v", caps)
	}
	v2, ok := c.InstancesV2()
	if !ok {
		t.Fatal("no InstancesV2")
	}
	if _, ok := v2.(stratus.InstanceWatcher); ok {
		t.Error("InstancesV2 is an InstanceWatcher; minicloud does not watch")
	}
	md, err := v2.InstanceMetadata(ctx, node("n1", ""))
	if err != nil || md.ProviderID != mcprovider.ProviderID(inst.ID) || md.Zone != "mc-central-a" || md.InstanceType != "mc.small" ||
		len(md.NodeAddresses) == 0 || md.NodeAddresses[0].Address != inst.PrivateIP {
		t.Errorf("InstanceMetadata: %+v, %v", md, err)
	}
	list, err := v2.(stratus.InstanceLister).ListInstances(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "n1" || list[0].Metadata.ProviderID != mcprovider.ProviderID(inst.ID) {
		t.Errorf("ListInstances: %+v, %v", list, err)
	}

	if err := mc.Client.DeleteInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	gone := node("n1", mcprovider.ProviderID(inst.ID))
	if exists, err := v2.InstanceExists(ctx, gone); err != nil || exists {
		t.Errorf("InstanceExists of a deleted instance: %v, %v; want false, nil", exists, err)
	}
	if _, err := v2.InstanceMetadata(ctx, gone); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("InstanceMetadata of a deleted instance: %v; want InstanceNotFound", err)
	}

	lb, _ := c.LoadBalancer()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "0b0c8f6e-1f4e-4d4a-9d5e-3f4b5c6d7e8f"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
	if name := lb.GetLoadBalancerName(ctx, "c1", svc); name != mcprovider.LoadBalancerName(svc) {
		t.Errorf("GetLoadBalancerName: %q, want %q", name, mcprovider.LoadBalancerName(svc))
	}
	_, err = lb.EnsureLoadBalancer(ctx, "c1", svc, nil)
	var retry interface{ RetryAfter() time.Duration }
	if !errors.As(err, &retry) || retry.RetryAfter() <= 0 {
		t.Errorf("EnsureLoadBalancer while provisioning: %v; want a RetryError with a delay", err)
	}
	refs, err := lb.(stratus.LoadBalancerLister).ListLoadBalancers(ctx, "c1")
	if err != nil || len(refs) != 1 || refs[0].ServiceName != "web" || refs[0].ServiceUID != svc.UID || !refs[0].Provisioning {
		t.Errorf("ListLoadBalancers: %+v, %v", refs, err)
	}

	if _, err := mc.Client.SetFaults(ctx, api.Faults{ThrottleRate: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = v2.(stratus.InstanceLister).ListInstances(ctx)
	var throttled *stratus.ThrottledError
	if !errors.As(err, &throttled) {
		t.Errorf("ListInstances while minicloud throttles: %v; want a ThrottledError", err)
	}
}

// While the plugin is down every call fails with a transient ErrUnavailable
// error: never "does not exist", never an empty listing. After it restarts on
// the same socket, calls work again; a plugin that comes back with other
// capabilities gets a protocol error instead.
func TestPluginDownAndBack(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{NoDataPlane: true})
	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "n1", Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	addr := socket(t)
	provider := mcprovider.NewFromClient(mc.Client)
	stop := serve(t, provider, plugin.ServeOptions{Address: addr})
	c := dial(t, plugin.Config{Address: addr})
	v2, _ := c.InstancesV2()
	n := node("n1", mcprovider.ProviderID(inst.ID))
	if exists, err := v2.InstanceExists(ctx, n); err != nil || !exists {
		t.Fatalf("InstanceExists: %v, %v", exists, err)
	}
	if !c.Connected() {
		t.Error("Connected() is false while the plugin serves")
	}

	stop()
	// What stratus_cloud_plugin_connected reports.
	testsupport.Eventually(t, 30*time.Second, "Connected() false once the plugin stopped", func(context.Context) (bool, error) {
		return !c.Connected(), nil
	})
	for range 3 { // the first call after the loss, and later ones
		exists, err := v2.InstanceExists(ctx, n)
		if err == nil || !stratus.IsTransient(err) || !errors.Is(err, plugin.ErrUnavailable) {
			t.Errorf("InstanceExists while the plugin is down: %v, %v; want a transient ErrUnavailable error", exists, err)
		}
		list, err := v2.(stratus.InstanceLister).ListInstances(ctx)
		if err == nil || !stratus.IsTransient(err) {
			t.Errorf("ListInstances while the plugin is down: %v, %v; want a transient error", list, err)
		}
	}

	stop = serve(t, provider, plugin.ServeOptions{Address: addr})
	testsupport.EventuallyState(t, 30*time.Second, "calls to work after the plugin restarted", func(context.Context) (bool, string) {
		exists, err := v2.InstanceExists(ctx, n)
		return err == nil && exists, errString(err)
	})
	if !c.Connected() {
		t.Error("Connected() is false after the plugin came back and answered")
	}

	// Back with other capabilities: the upstream fake has no listing.
	stop()
	serve(t, &fake.Cloud{Provider: "minicloud", EnableInstancesV2: true, ExistsByProviderID: true}, plugin.ServeOptions{Address: addr})
	testsupport.EventuallyState(t, 30*time.Second, "a protocol error after the capabilities changed", func(context.Context) (bool, string) {
		_, err := v2.InstanceExists(ctx, n)
		return errors.Is(err, plugin.ErrProtocol) && strings.Contains(err.Error(), "capabilities changed") && !stratus.IsTransient(err), errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// liar claims every interface and extension, answers replies without their
// required fields or with garbage objects, and implements nothing else.
type liar struct {
	pb.UnimplementedProviderServer
	version uint32
	// caps, when set, is the answer to GetCapabilities instead.
	caps *pb.Capabilities
}

func liarCaps(version uint32) *pb.Capabilities {
	return &pb.Capabilities{
		ProtocolVersion: proto.Uint32(version), ProviderName: proto.String("liar"), ProviderIdScheme: proto.String("liar"), HasClusterId: proto.Bool(true),
		Interfaces: []pb.Interface{pb.Interface_INTERFACE_INSTANCES_V2, pb.Interface_INTERFACE_LOAD_BALANCER, pb.Interface_INTERFACE_ROUTES,
			pb.Interface_INTERFACE_INSTANCES, pb.Interface_INTERFACE_ZONES},
		Extensions: []pb.Extension{pb.Extension_EXTENSION_INSTANCE_LISTER},
	}
}

func (l *liar) GetCapabilities(context.Context, *pb.GetCapabilitiesRequest) (*pb.Capabilities, error) {
	if l.caps != nil {
		return l.caps, nil
	}
	return liarCaps(l.version), nil
}

func (l *liar) InstanceID(context.Context, *pb.NodeNameRequest) (*pb.InstanceIDResponse, error) {
	return &pb.InstanceIDResponse{}, nil
}

func (l *liar) NodeAddressesByProviderID(context.Context, *pb.ProviderIDRequest) (*pb.NodeAddressesResponse, error) {
	return &pb.NodeAddressesResponse{NodeAddresses: []*pb.NodeAddress{{Address: proto.String("10.0.0.1")}}}, nil
}

func (l *liar) GetZoneByProviderID(context.Context, *pb.ProviderIDRequest) (*pb.ZoneResponse, error) {
	return &pb.ZoneResponse{Zone: &pb.Zone{FailureDomain: proto.String("a")}}, nil
}

func (l *liar) InstanceExists(context.Context, *pb.InstanceRequest) (*pb.InstanceExistsResponse, error) {
	return &pb.InstanceExistsResponse{}, nil
}

func (l *liar) ListInstances(context.Context, *pb.ListInstancesRequest) (*pb.ListInstancesResponse, error) {
	return &pb.ListInstancesResponse{Instances: []*pb.Instance{{Name: proto.String("i")}}}, nil
}

func (l *liar) GetLoadBalancer(context.Context, *pb.LoadBalancerRequest) (*pb.GetLoadBalancerResponse, error) {
	return &pb.GetLoadBalancerResponse{Exists: proto.Bool(true), Status: []byte("{not json")}, nil
}

// startLiar serves l (or, when l is nil, the first of others) on a new
// socket.
func startLiar(t *testing.T, l *liar, others ...pb.ProviderServer) string {
	t.Helper()
	var impl pb.ProviderServer = l
	if l == nil {
		impl = others[0]
	}
	addr := socket(t)
	lis, err := net.Listen("unix", strings.TrimPrefix(addr, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterProviderServer(srv, impl)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return addr
}

// A plugin that answers garbage gets clear, non-transient errors: no "does
// not exist" for a reply without the answer, no empty listing for a broken
// one.
func TestGarbageAnswers(t *testing.T) {
	ctx := context.Background()
	addr := startLiar(t, &liar{version: plugin.ProtocolVersion})
	c := dial(t, plugin.Config{Address: addr})
	v2, _ := c.InstancesV2()
	lb, _ := c.LoadBalancer()
	routes, _ := c.Routes()
	inst, _ := c.Instances()
	zones, _ := c.Zones()
	for _, tc := range []struct {
		name, want string
		call       func() error
	}{
		{"InstanceExists without exists", "InstanceExists: plugin protocol violation: the reply has no exists", func() error {
			_, err := v2.InstanceExists(ctx, node("n", "liar://1"))
			return err
		}},
		{"ListInstances without required fields", "instances[0]: name, shutdown and metadata.provider_id are required", func() error {
			_, err := v2.(stratus.InstanceLister).ListInstances(ctx)
			return err
		}},
		{"GetLoadBalancer with a garbage status", "status: not a Kubernetes JSON object", func() error {
			_, _, err := lb.GetLoadBalancer(ctx, "c", &v1.Service{})
			return err
		}},
		{"claimed but not implemented", "ListRoutes: plugin protocol violation: the plugin claims the capability but does not implement the method", func() error {
			_, err := routes.ListRoutes(ctx, "c")
			return err
		}},
		{"Instances claimed but not implemented", "InstanceTypeByProviderID: plugin protocol violation: the plugin claims the capability", func() error {
			_, err := inst.InstanceTypeByProviderID(ctx, "liar://1")
			return err
		}},
		{"Zones claimed but not implemented", "GetZoneByNodeName: plugin protocol violation: the plugin claims the capability", func() error {
			_, err := zones.GetZoneByNodeName(ctx, "n")
			return err
		}},
		{"InstanceID without instance_id", "InstanceID: plugin protocol violation: the reply has no instance_id", func() error {
			_, err := inst.InstanceID(ctx, "n")
			return err
		}},
		{"NodeAddressesByProviderID with an address without type", "node_addresses[0]: type and address are required", func() error {
			_, err := inst.NodeAddressesByProviderID(ctx, "liar://1")
			return err
		}},
		{"GetZoneByProviderID without region", "GetZoneByProviderID: plugin protocol violation: the reply has no zone with failure_domain and region", func() error {
			_, err := zones.GetZoneByProviderID(ctx, "liar://1")
			return err
		}},
	} {
		err := tc.call()
		if err == nil || !errors.Is(err, plugin.ErrProtocol) || stratus.IsTransient(err) || errors.Is(err, cloudprovider.InstanceNotFound) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a protocol error containing %q", tc.name, err, tc.want)
		}
	}

	// A plugin that chooses a version the manager does not speak is refused
	// at connection.
	addr = startLiar(t, &liar{version: 2})
	if _, err := plugin.Dial(ctx, plugin.Config{Address: addr}); err == nil || !strings.Contains(err.Error(), "protocol version 2") {
		t.Errorf("Dial a plugin of version 2: %v", err)
	}
}

// Over TCP the plugin and the manager authenticate each other: a manager
// with a certificate of the CA connects, one with another CA's does not.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := writeCA(t, dir, "ca")
	otherCA, otherKey := writeCA(t, dir, "other")
	writeCert(t, dir, "plugin", ca, caKey, "127.0.0.1")
	writeCert(t, dir, "manager", ca, caKey, "")
	writeCert(t, dir, "stranger", otherCA, otherKey, "")
	files := func(name, caName string) *plugin.TLSConfig {
		return &plugin.TLSConfig{CAFile: filepath.Join(dir, caName+".crt"), CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, &fake.Cloud{Provider: "fake", EnableInstancesV2: true, ExistsByProviderID: true}, plugin.ServeOptions{Listener: lis, TLS: files("plugin", "ca")})

	c := dial(t, plugin.Config{Address: lis.Addr().String(), TLS: files("manager", "ca")})
	v2, _ := c.InstancesV2()
	if exists, err := v2.InstanceExists(context.Background(), node("n", "fake://1")); err != nil || !exists {
		t.Errorf("InstanceExists over mutual TLS: %v, %v", exists, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := plugin.Dial(ctx, plugin.Config{Address: lis.Addr().String(), TLS: files("stranger", "ca")}); err == nil {
		t.Error("a manager with another CA's certificate connected")
	}
	if errs := (plugin.Config{Address: lis.Addr().String()}).Validate(); len(errs) != 1 || errs[0].Field != "tls" {
		t.Errorf("TCP without TLS: %v; want a tls error", errs)
	}
}

func writeCA(t *testing.T, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, ip string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	if ip != "" {
		tmpl.IPAddresses = []net.IP{net.ParseIP(ip)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A plugin whose capabilities contradict themselves is refused at connection
// with an error saying what is wrong.
func TestCapabilityLies(t *testing.T) {
	with := func(edit func(*pb.Capabilities)) *pb.Capabilities {
		c := liarCaps(plugin.ProtocolVersion)
		edit(c)
		return c
	}
	for _, tc := range []struct {
		name, want string
		caps       *pb.Capabilities
	}{
		{"no interface", "claims none of the interfaces", with(func(c *pb.Capabilities) { c.Interfaces, c.Extensions = nil, nil })},
		{"only unknown interfaces", "claims none of the interfaces", with(func(c *pb.Capabilities) { c.Interfaces, c.Extensions = []pb.Interface{99}, nil })},
		{"zones alone", "interface ZONES without INSTANCES or INSTANCES_V2", with(func(c *pb.Capabilities) {
			c.Interfaces, c.Extensions = []pb.Interface{pb.Interface_INTERFACE_ZONES}, nil
		})},
		{"instance lister without InstancesV2", "extension EXTENSION_INSTANCE_LISTER without interface INSTANCES_V2", with(func(c *pb.Capabilities) {
			c.Interfaces = []pb.Interface{pb.Interface_INTERFACE_INSTANCES, pb.Interface_INTERFACE_ZONES}
		})},
		{"load-balancer lister without LoadBalancer", "extension EXTENSION_LOAD_BALANCER_LISTER without interface LOAD_BALANCER", with(func(c *pb.Capabilities) {
			c.Interfaces = []pb.Interface{pb.Interface_INTERFACE_ROUTES}
			c.Extensions = []pb.Extension{pb.Extension_EXTENSION_LOAD_BALANCER_LISTER}
		})},
		{"watcher without lister", "extension INSTANCE_WATCHER without INSTANCE_LISTER", with(func(c *pb.Capabilities) {
			c.Extensions = []pb.Extension{pb.Extension_EXTENSION_INSTANCE_WATCHER}
		})},
		{"no provider_id_scheme", "the reply has no provider_id_scheme", with(func(c *pb.Capabilities) { c.ProviderIdScheme = nil })},
		{"no protocol_version", "the reply has no protocol_version", with(func(c *pb.Capabilities) { c.ProtocolVersion = nil })},
		{"no has_cluster_id", "the reply has no has_cluster_id", with(func(c *pb.Capabilities) { c.HasClusterId = nil })},
	} {
		addr := startLiar(t, &liar{caps: tc.caps})
		_, err := plugin.Dial(context.Background(), plugin.Config{Address: addr})
		if err == nil || !errors.Is(err, plugin.ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Dial: %v; want a protocol error containing %q", tc.name, err, tc.want)
		}
	}
}

// refuser is an older (or newer) plugin that speaks none of the manager's
// protocol versions.
type refuser struct{ pb.UnimplementedProviderServer }

func (refuser) GetCapabilities(context.Context, *pb.GetCapabilitiesRequest) (*pb.Capabilities, error) {
	return nil, status.Error(codes.FailedPrecondition, "the plugin speaks protocol version 0")
}

// Version negotiation both ways: a plugin that speaks none of the manager's
// versions is refused with the plugin's reason; a newer plugin that also
// speaks version 1 is used, and what it claims beyond what this manager
// knows is left alone; the plugin's side refuses a manager that does not
// speak its version and picks 1 from a list that has it.
func TestVersionNegotiation(t *testing.T) {
	ctx := context.Background()
	ctxT, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := plugin.Dial(ctxT, plugin.Config{Address: startLiar(t, nil, refuser{})}); err == nil || !errors.Is(err, plugin.ErrProtocol) ||
		!strings.Contains(err.Error(), "version negotiation failed: the plugin speaks protocol version 0") {
		t.Errorf("Dial a plugin of version 0: %v", err)
	}

	newer := liarCaps(plugin.ProtocolVersion)
	newer.Interfaces = append(newer.Interfaces, 99)
	newer.Extensions = append(newer.Extensions, 42)
	c := dial(t, plugin.Config{Address: startLiar(t, &liar{caps: newer})})
	if _, ok := c.InstancesV2(); !ok {
		t.Error("the newer plugin's InstancesV2 is not used")
	}
	if _, ok := c.Zones(); !ok {
		t.Error("the newer plugin's Zones are not used")
	}

	addr := socket(t)
	serve(t, &fake.Cloud{Provider: "fake", EnableInstancesV2: true}, plugin.ServeOptions{Address: addr})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := pb.NewProviderClient(conn)
	_, err = rpc.GetCapabilities(ctx, &pb.GetCapabilitiesRequest{ProtocolVersions: []uint32{2, 3}}, grpc.WaitForReady(true))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the plugin speaks protocol version 1; the manager speaks [2 3]") {
		t.Errorf("GetCapabilities from a manager of versions 2 and 3: %v; want FAILED_PRECONDITION", err)
	}
	caps, err := rpc.GetCapabilities(ctx, &pb.GetCapabilitiesRequest{ProtocolVersions: []uint32{2, 1}})
	if err != nil || caps.GetProtocolVersion() != 1 {
		t.Errorf("GetCapabilities from a manager of versions 2 and 1: %v, %v; want version 1", caps, err)
	}
}

// An upstream provider with only Instances (v1) and Zones, as a plugin:
// the cloud layer assembles the same metadata and answers the same
// existence and shutdown questions as with the provider in process
// (provider-ID lookup by name, InstanceNotFound by name meaning "does not
// exist"), and the calls the layer does not make cross too.
func TestInstancesV1AsPlugin(t *testing.T) {
	ctx := context.Background()
	raw := &fake.Cloud{
		Provider:           "v1cloud",
		Addresses:          []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}},
		ExtID:              map[types.NodeName]string{"by-name": "i-9"},
		ExtIDErr:           map[types.NodeName]error{"missing": cloudprovider.InstanceNotFound},
		InstanceTypes:      map[types.NodeName]string{"v1cloud://i-9": "large", "by-name": "large"},
		Zone:               cloudprovider.Zone{FailureDomain: "zone-b", Region: "region-2"},
		ExistsByProviderID: true,
		NodeShutdown:       true,
		DisableRoutes:      true, DisableLoadBalancers: true, DisableClusters: true,
	}
	addr := socket(t)
	serve(t, raw, plugin.ServeOptions{Address: addr})
	c := dial(t, plugin.Config{Address: addr})
	if _, ok := c.InstancesV2(); ok {
		t.Error("the plugin has InstancesV2; the provider has none")
	}
	if _, ok := c.LoadBalancer(); ok {
		t.Error("the plugin has a LoadBalancer; the provider has none")
	}
	inProcess := cloud.NewProvider("v1cloud", raw)
	viaPlugin := cloud.NewProvider("v1cloud", c) // the same name: errors name the provider
	if !viaPlugin.HasInstances() {
		t.Fatal("HasInstances through the plugin = false")
	}
	for _, n := range []*v1.Node{node("by-name", ""), node("x", "v1cloud://i-9"), node("missing", "")} {
		wantMD, wantErr := inProcess.InstanceMetadata(ctx, n)
		md, err := viaPlugin.InstanceMetadata(ctx, n)
		if diff := cmp.Diff(wantMD, md); diff != "" || errString(err) != errString(wantErr) {
			t.Errorf("InstanceMetadata(%s) through the plugin: %v; in process: %v (-in process +plugin):\n%s", n.Name, err, wantErr, diff)
		}
		if errors.Is(wantErr, cloudprovider.InstanceNotFound) != errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Errorf("InstanceMetadata(%s): InstanceNotFound in process %v, through the plugin %v", n.Name, wantErr, err)
		}
		for what, f := range map[string]func(*cloud.Provider) (bool, error){
			"InstanceExists":   func(p *cloud.Provider) (bool, error) { return p.InstanceExists(ctx, n) },
			"InstanceShutdown": func(p *cloud.Provider) (bool, error) { return p.InstanceShutdown(ctx, n) },
		} {
			want, wantErr := f(inProcess)
			got, err := f(viaPlugin)
			if got != want || errString(err) != errString(wantErr) {
				t.Errorf("%s(%s): through the plugin %v, %v; in process %v, %v", what, n.Name, got, err, want, wantErr)
			}
		}
	}
	if md, err := viaPlugin.InstanceMetadata(ctx, node("by-name", "")); err != nil || md.Zone != "zone-b" || md.InstanceType != "large" || md.ProviderID != "v1cloud://i-9" {
		t.Errorf("InstanceMetadata(by-name) through the plugin: %+v, %v", md, err)
	}

	inst, _ := c.Instances()
	zones, _ := c.Zones()
	if name, err := inst.CurrentNodeName(ctx, "host-1"); err != nil || name != "host-1" {
		t.Errorf("CurrentNodeName: %q, %v", name, err)
	}
	if zone, err := zones.GetZone(ctx); err != nil || zone != raw.Zone {
		t.Errorf("GetZone: %+v, %v", zone, err)
	}
	if addrs, err := inst.NodeAddresses(ctx, "by-name"); err != nil || !cmp.Equal(addrs, raw.Addresses) {
		t.Errorf("NodeAddresses: %v, %v", addrs, err)
	}
	if _, err := inst.InstanceID(ctx, "missing"); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("InstanceID(missing): %v; want InstanceNotFound", err)
	}
	if err := inst.AddSSHKeyToAllInstances(ctx, "root", []byte("ssh-ed25519 AAAA")); !errors.Is(err, cloudprovider.NotImplemented) {
		t.Errorf("AddSSHKeyToAllInstances: %v; want NotImplemented", err)
	}
}

// Serve refuses a provider that has nothing the manager could use: Zones
// alone are only asked about nodes, so they do not count.
func TestServeRefusesEmptyProvider(t *testing.T) {
	zonesOnly := &fake.Cloud{Provider: "empty", DisableInstances: true, DisableRoutes: true, DisableLoadBalancers: true}
	err := plugin.Serve(context.Background(), zonesOnly, plugin.ServeOptions{Address: socket(t)})
	if err == nil || !strings.Contains(err.Error(), `serve provider "empty": it supports none of InstancesV2, Instances, LoadBalancer and Routes`) {
		t.Errorf("Serve of a provider with Zones only: %v", err)
	}
}

// The plugin's side answers a request without a required field with
// INVALID_ARGUMENT naming the field, without asking the provider.
func TestServerRejectsIncompleteRequests(t *testing.T) {
	ctx := context.Background()
	addr := socket(t)
	raw := &fake.Cloud{Provider: "v1cloud", ExistsByProviderID: true}
	serve(t, raw, plugin.ServeOptions{Address: addr})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := pb.NewProviderClient(conn)
	for _, tc := range []struct {
		call  string
		field string
		err   error
	}{
		{"InstanceExistsByProviderID", "provider_id", func() error {
			_, err := rpc.InstanceExistsByProviderID(ctx, &pb.ProviderIDRequest{}, grpc.WaitForReady(true))
			return err
		}()},
		{"InstanceID", "node_name", func() error { _, err := rpc.InstanceID(ctx, &pb.NodeNameRequest{}); return err }()},
		{"CurrentNodeName", "hostname", func() error { _, err := rpc.CurrentNodeName(ctx, &pb.CurrentNodeNameRequest{}); return err }()},
		{"GetZoneByProviderID", "provider_id", func() error { _, err := rpc.GetZoneByProviderID(ctx, &pb.ProviderIDRequest{}); return err }()},
		{"GetZoneByNodeName", "node_name", func() error { _, err := rpc.GetZoneByNodeName(ctx, &pb.NodeNameRequest{}); return err }()},
	} {
		if status.Code(tc.err) != codes.InvalidArgument || !strings.Contains(tc.err.Error(), tc.field+": required") {
			t.Errorf("%s without %s: %v; want INVALID_ARGUMENT naming the field", tc.call, tc.field, tc.err)
		}
	}
	if len(raw.Calls) != 0 {
		t.Errorf("the provider was called: %v", raw.Calls)
	}
}

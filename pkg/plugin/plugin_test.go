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

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
	"github.com/stratus-ccm/stratus/pkg/plugin"
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
		!proto.Equal(&pb.Capabilities{Extensions: caps.Extensions}, &pb.Capabilities{Extensions: []pb.Extension{pb.Extension_EXTENSION_INSTANCE_LISTER, pb.Extension_EXTENSION_LOAD_BALANCER_LISTER}}) {
		t.Errorf("capabilities %v", caps)
	}
	v2, ok := c.InstancesV2()
	if !ok {
		t.Fatal("no InstancesV2")
	}
	if _, ok := v2.(pcp.InstanceWatcher); ok {
		t.Error("InstancesV2 is an InstanceWatcher; minicloud does not watch")
	}
	md, err := v2.InstanceMetadata(ctx, node("n1", ""))
	if err != nil || md.ProviderID != mcprovider.ProviderID(inst.ID) || md.Zone != "mc-central-a" || md.InstanceType != "mc.small" ||
		len(md.NodeAddresses) == 0 || md.NodeAddresses[0].Address != inst.PrivateIP {
		t.Errorf("InstanceMetadata: %+v, %v", md, err)
	}
	list, err := v2.(pcp.InstanceLister).ListInstances(ctx)
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
	refs, err := lb.(pcp.LoadBalancerLister).ListLoadBalancers(ctx, "c1")
	if err != nil || len(refs) != 1 || refs[0].ServiceName != "web" || refs[0].ServiceUID != svc.UID || !refs[0].Provisioning {
		t.Errorf("ListLoadBalancers: %+v, %v", refs, err)
	}

	if _, err := mc.Client.SetFaults(ctx, api.Faults{ThrottleRate: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = v2.(pcp.InstanceLister).ListInstances(ctx)
	var throttled *pcp.ThrottledError
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

	stop()
	for range 3 { // the first call after the loss, and later ones
		exists, err := v2.InstanceExists(ctx, n)
		if err == nil || !pcp.IsTransient(err) || !errors.Is(err, plugin.ErrUnavailable) {
			t.Errorf("InstanceExists while the plugin is down: %v, %v; want a transient ErrUnavailable error", exists, err)
		}
		list, err := v2.(pcp.InstanceLister).ListInstances(ctx)
		if err == nil || !pcp.IsTransient(err) {
			t.Errorf("ListInstances while the plugin is down: %v, %v; want a transient error", list, err)
		}
	}

	stop = serve(t, provider, plugin.ServeOptions{Address: addr})
	waitFor(t, "calls to work after the plugin restarted", func() (bool, string) {
		exists, err := v2.InstanceExists(ctx, n)
		return err == nil && exists, errString(err)
	})

	// Back with other capabilities: the upstream fake has no listing.
	stop()
	serve(t, &fake.Cloud{Provider: "minicloud", EnableInstancesV2: true, ExistsByProviderID: true}, plugin.ServeOptions{Address: addr})
	waitFor(t, "a protocol error after the capabilities changed", func() (bool, string) {
		_, err := v2.InstanceExists(ctx, n)
		return errors.Is(err, plugin.ErrProtocol) && strings.Contains(err.Error(), "capabilities changed") && !pcp.IsTransient(err), errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var ok bool
		ok, last = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

// liar claims every interface and extension, answers replies without their
// required fields or with garbage objects, and implements nothing else.
type liar struct {
	pb.UnimplementedProviderServer
	version uint32
}

func (l *liar) GetCapabilities(context.Context, *pb.GetCapabilitiesRequest) (*pb.Capabilities, error) {
	return &pb.Capabilities{
		ProtocolVersion: proto.Uint32(l.version), ProviderName: proto.String("liar"), ProviderIdScheme: proto.String("liar"), HasClusterId: proto.Bool(true),
		Interfaces: []pb.Interface{pb.Interface_INTERFACE_INSTANCES_V2, pb.Interface_INTERFACE_LOAD_BALANCER, pb.Interface_INTERFACE_ROUTES},
		Extensions: []pb.Extension{pb.Extension_EXTENSION_INSTANCE_LISTER},
	}, nil
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

func startLiar(t *testing.T, l *liar) string {
	t.Helper()
	addr := socket(t)
	lis, err := net.Listen("unix", strings.TrimPrefix(addr, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterProviderServer(srv, l)
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
	for _, tc := range []struct {
		name, want string
		call       func() error
	}{
		{"InstanceExists without exists", "InstanceExists: plugin protocol violation: the reply has no exists", func() error {
			_, err := v2.InstanceExists(ctx, node("n", "liar://1"))
			return err
		}},
		{"ListInstances without required fields", "instances[0]: name, shutdown and metadata.provider_id are required", func() error {
			_, err := v2.(pcp.InstanceLister).ListInstances(ctx)
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
	} {
		err := tc.call()
		if err == nil || !errors.Is(err, plugin.ErrProtocol) || pcp.IsTransient(err) || errors.Is(err, cloudprovider.InstanceNotFound) || !strings.Contains(err.Error(), tc.want) {
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

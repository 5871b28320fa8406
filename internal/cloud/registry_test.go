package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// fakeType is the name k8s.io/cloud-provider/fake is registered under below.
const fakeType = "stratus-test-fake"

// fakeConfig is the cloud-config the registered fake understands.
type fakeConfig struct {
	Scheme string `json:"scheme"`
	Zone   string `json:"zone"`
	Region string `json:"region"`
	Fail   bool   `json:"fail"`
	// NoRoutes, NoLoadBalancers and NoInstances disable capabilities.
	NoRoutes        bool `json:"noRoutes"`
	NoLoadBalancers bool `json:"noLoadBalancers"`
	NoInstances     bool `json:"noInstances"`
}

// This is exactly how an upstream provider package registers itself: in init(),
// with a factory that reads the opaque cloud-config.
func init() {
	cloudprovider.RegisterCloudProvider(fakeType, func(config io.Reader) (cloudprovider.Interface, error) {
		var cfg fakeConfig
		if config != nil {
			data, err := io.ReadAll(config)
			if err != nil {
				return nil, err
			}
			if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
				return nil, fmt.Errorf("parse cloud-config: %w", err)
			}
		}
		if cfg.Fail {
			return nil, errors.New("cloud-config asked to fail")
		}
		return &fake.Cloud{
			Provider:             cfg.Scheme,
			DisableRoutes:        cfg.NoRoutes,
			DisableLoadBalancers: cfg.NoLoadBalancers,
			DisableInstances:     cfg.NoInstances,
			EnableInstancesV2:    !cfg.NoInstances,
			ExistsByProviderID:   true,
			Zone:                 cloudprovider.Zone{FailureDomain: cfg.Zone, Region: cfg.Region},
			ExternalIP:           net.ParseIP("192.0.2.10"),
			Addresses:            []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.7"}},
			RouteMap:             map[string]*fake.Route{},
		}, nil
	})
}

// requestCount reads stratus_cloud_requests_total from the controller-runtime
// registry, as a scraper would.
func requestCount(t *testing.T, provider, method, outcome string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"provider": provider, "method": method, "outcome": outcome}
	for _, mf := range mfs {
		if mf.GetName() != "stratus_cloud_requests_total" {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The upstream --cloud-provider/--cloud-config style with an unmodified provider
// registered in init(): the cloud-config file reaches the factory, and nodes,
// load balancers and routes are served through the layer.
func TestUpstreamProviderRegisteredInInit(t *testing.T) {
	configFile := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(configFile, []byte("scheme: fakecloud\nzone: zone-a\nregion: region-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := cloud.Build(cloud.FromFlags(fakeType, configFile))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	ctx := cloud.WithPriority(context.Background(), cloud.PriorityNodeInit)
	before := requestCount(t, fakeType, "EnsureLoadBalancer", cloud.OutcomeSuccess)

	// Nodes: a node of the provider's scheme and a node without ID are its own.
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{ProviderID: "fakecloud://i-1"}}
	p := set.ForNode(n)
	if p == nil || p.Name() != fakeType || p.ProviderName() != "fakecloud" {
		t.Fatalf("ForNode = %v, want the %s provider with scheme fakecloud", p, fakeType)
	}
	if set.ForNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}}) != p {
		t.Error("a node without provider ID is not the single provider's")
	}
	if set.ForNode(&v1.Node{Spec: v1.NodeSpec{ProviderID: "othercloud://i-9"}}) != nil {
		t.Error("a node of another cloud was claimed")
	}
	md, err := p.InstanceMetadata(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if md.Zone != "zone-a" || md.Region != "region-1" || len(md.NodeAddresses) != 1 {
		t.Errorf("metadata = %+v, want zone-a/region-1 and one address from the cloud-config'd fake", md)
	}
	if exists, err := p.InstanceExists(ctx, n); err != nil || !exists {
		t.Errorf("InstanceExists = %v, %v", exists, err)
	}

	// Load balancers: a Service without class.
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("uid-1")},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	lbp := set.ForService(svc)
	if lbp != p {
		t.Fatalf("ForService = %v, want the single provider", lbp)
	}
	lb, ok := lbp.LoadBalancer()
	if !ok {
		t.Fatal("LoadBalancer not supported")
	}
	status, err := lb.EnsureLoadBalancer(cloud.WithPriority(ctx, cloud.PriorityLBWrite), "kubernetes", svc, []*v1.Node{n})
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Ingress) != 1 || status.Ingress[0].IP != "192.0.2.10" {
		t.Errorf("status = %+v, want ingress 192.0.2.10", status)
	}

	// Routes.
	rp := set.RoutesProvider()
	if rp != p {
		t.Fatalf("RoutesProvider = %v, want the single provider", rp)
	}
	routes, _ := rp.Routes()
	if err := routes.CreateRoute(ctx, "kubernetes", "uid", &cloudprovider.Route{TargetNode: "n1", DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	if got, err := routes.ListRoutes(ctx, "kubernetes"); err != nil || len(got) != 1 || got[0].DestinationCIDR != "10.244.1.0/24" {
		t.Errorf("ListRoutes = %v, %v; want the created route", got, err)
	}

	// The cloud saw the calls, and the layer counted them under the configured name.
	raw := p.Raw().(*fake.Cloud)
	if _, ok := raw.Balancers[raw.GetLoadBalancerName(ctx, "kubernetes", svc)]; !ok {
		t.Errorf("the fake cloud has no load balancer for the Service: %v", raw.Balancers)
	}
	if got := requestCount(t, fakeType, "EnsureLoadBalancer", cloud.OutcomeSuccess) - before; got != 1 {
		t.Errorf("EnsureLoadBalancer successes counted = %v, want 1", got)
	}
	if set.ProviderByName(fakeType) != p || set.ProviderByName("nope") != nil {
		t.Error("ProviderByName does not find providers by configured name")
	}
}

// The upstream style's errors name --cloud-provider and --cloud-config, never
// the configuration-file paths (providers[0], defaultNodeProvider) that the
// command line did not write.
func TestFromFlagsErrorsNameTheFlags(t *testing.T) {
	dir := t.TempDir()
	failing := filepath.Join(dir, "fail.yaml")
	if err := os.WriteFile(failing, []byte("fail: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	for _, tc := range []struct {
		name, provider, config string
		want                   string // the whole error
	}{
		{"unregistered", "nope", "", `--cloud-provider nope: provider "nope" is not registered (is its package imported into this build?)`},
		{"not a provider name", "no such/cloud", "", `--cloud-provider no such/cloud: provider "no such/cloud" is not registered (is its package imported into this build?)`},
		{"missing cloud-config", fakeType, missing, "--cloud-config " + missing + ": open " + missing + ": no such file or directory"},
		{"provider refuses its cloud-config", fakeType, failing,
			"--cloud-provider " + fakeType + " --cloud-config " + failing + `: initialize provider "` + fakeType + `" of type "` + fakeType + `": cloud-config asked to fail`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cloud.Build(cloud.FromFlags(tc.provider, tc.config))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Build = %v\nwant %s", err, tc.want)
			}
		})
	}
}

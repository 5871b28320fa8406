package cloud_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// parse reads a Config from YAML, as the manager's config file embeds it.
func parse(t *testing.T, doc string) cloud.Config {
	t.Helper()
	var c cloud.Config
	if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return c
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		wantErr []string // substrings, each must appear; none = valid
	}{
		{name: "single provider", config: `
providers:
- name: a
  type: ` + fakeType},
		{name: "full", config: `
providers:
- name: east
  type: ` + fakeType + `
  cloudConfig: "scheme: mini"
  providerIDPrefix: mini://east/
  loadBalancerClasses: [example.com/east]
  budget: {rate: 5, burst: 10, maxConcurrent: 4, maxRetries: -1}
  instanceCacheFreshness: 1m
- name: west
  type: ` + fakeType + `
  nodeSelector: {matchLabels: {region: west}}
defaultNodeProvider: east
defaultLoadBalancerProvider: west
routesProvider: east`},
		{name: "no providers", config: `providers: []`,
			wantErr: []string{"providers: at least one provider is required"}},
		{name: "unregistered type", config: `
providers:
- {name: a, type: ` + fakeType + `}
- {name: b, type: nope}`,
			wantErr: []string{`providers[1].type: provider "nope" is not registered`}},
		{name: "missing name and type", config: `
providers:
- {cloudConfig: x}`,
			wantErr: []string{"providers[0].name: required", "providers[0].type: required"}},
		{name: "duplicate name", config: `
providers:
- {name: a, type: ` + fakeType + `}
- {name: a, type: ` + fakeType + `}`,
			wantErr: []string{`providers[1].name: "a" is already the name of providers[0]`}},
		{name: "bad name", config: `
providers:
- {name: "a b", type: ` + fakeType + `}`,
			wantErr: []string{`providers[0].name: "a b" must be`}},
		{name: "both cloud-configs", config: `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: x, cloudConfigFile: /etc/x}`,
			wantErr: []string{"providers[0].cloudConfigFile: set either cloudConfig or cloudConfigFile, not both"}},
		{name: "prefix without scheme", config: `
providers:
- {name: a, type: ` + fakeType + `, providerIDPrefix: east/}`,
			wantErr: []string{`providers[0].providerIDPrefix: "east/" must start with the provider-ID scheme`}},
		{name: "bad selector", config: `
providers:
- name: a
  type: ` + fakeType + `
  nodeSelector: {matchExpressions: [{key: region, operator: Sometimes}]}`,
			wantErr: []string{"providers[0].nodeSelector:", "Sometimes"}},
		{name: "class mapped twice and empty class", config: `
providers:
- {name: a, type: ` + fakeType + `, loadBalancerClasses: [x]}
- {name: b, type: ` + fakeType + `, loadBalancerClasses: ["", x]}`,
			wantErr: []string{
				"providers[1].loadBalancerClasses[0]: must not be empty",
				`providers[1].loadBalancerClasses[1]: class "x" is already mapped to provider "a"`,
			}},
		{name: "negative budget", config: `
providers:
- name: a
  type: ` + fakeType + `
  budget: {rate: -1, burst: -1, maxConcurrent: -1, maxRetries: -2}
  instanceCacheFreshness: -1s`,
			wantErr: []string{
				"providers[0].budget.rate: must not be negative",
				"providers[0].budget.burst: must not be negative",
				"providers[0].budget.maxConcurrent: must not be negative",
				"providers[0].budget.maxRetries: must be -1",
				"providers[0].instanceCacheFreshness: must not be negative",
			}},
		{name: "unknown default providers", config: `
providers:
- {name: a, type: ` + fakeType + `}
defaultNodeProvider: b
defaultLoadBalancerProvider: c
routesProvider: d`,
			wantErr: []string{
				`defaultNodeProvider: "b" is not the name of a configured provider`,
				`defaultLoadBalancerProvider: "c" is not`,
				`routesProvider: "d" is not`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(t, tc.config).Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted an invalid config, want %q", tc.wantErr)
			}
			if !errors.Is(err, cloud.ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain %q", err, want)
				}
			}
		})
	}
}

// Problems only visible when the providers are opened are start-up errors too.
func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		wantErr string
	}{
		{"factory fails", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: "fail: true"}`,
			`providers[0]: initialize provider "a" of type "` + fakeType + `": cloud-config asked to fail`},
		{"cloud-config file missing", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfigFile: ` + filepath.Join(t.TempDir(), "missing.yaml") + `}`,
			"providers[0].cloudConfigFile: open "},
		{"prefix of another scheme", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: "scheme: mini", providerIDPrefix: "aws://east/"}`,
			`providers[0].providerIDPrefix: "aws://east/" does not start with the provider's scheme "mini://"`},
		{"classes on a provider without load balancers", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: "noLoadBalancers: true", loadBalancerClasses: [x]}`,
			`providers[0].loadBalancerClasses: provider "a" does not support load balancers`},
		{"explicit routes provider without routes", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: "noRoutes: true"}
routesProvider: a`,
			`routesProvider: provider "a" does not support routes`},
		{"explicit node provider without instances", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: "noInstances: true"}
defaultNodeProvider: a`,
			`defaultNodeProvider: provider "a" supports neither Instances nor InstancesV2`},
		{"explicit LB provider without load balancers", `
providers:
- {name: a, type: ` + fakeType + `, cloudConfig: "noLoadBalancers: true"}
defaultLoadBalancerProvider: a`,
			`defaultLoadBalancerProvider: provider "a" does not support load balancers`},
		{"shared scheme without narrowing", `
providers:
- {name: east, type: ` + fakeType + `, cloudConfig: "scheme: mini", providerIDPrefix: "mini://east/"}
- {name: west, type: ` + fakeType + `, cloudConfig: "scheme: mini"}`,
			`providers[1]: provider "west" shares the provider-ID scheme "mini" with other providers; set providerIDPrefix or nodeSelector`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cloud.Build(parse(t, tc.config))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Build error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestCompositionRouting(t *testing.T) {
	set, err := cloud.Build(parse(t, `
providers:
- name: east
  type: `+fakeType+`
  cloudConfig: "scheme: mini"
  providerIDPrefix: mini://east/
  loadBalancerClasses: [example.com/east]
- name: west
  type: `+fakeType+`
  cloudConfig: "scheme: mini"
  nodeSelector: {matchLabels: {region: west}}
- name: vsphere
  type: `+fakeType+`
  cloudConfig: "scheme: vsphere"
  loadBalancerClasses: [example.com/vsphere]
defaultNodeProvider: vsphere
defaultLoadBalancerProvider: east
routesProvider: west
`))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	name := func(p *cloud.Provider) string {
		if p == nil {
			return "<nobody>"
		}
		return p.Name()
	}
	west := map[string]string{"region": "west"}

	for _, tc := range []struct {
		providerID string
		labels     map[string]string
		want       string
	}{
		{"mini://east/i-1", nil, "east"},
		{"mini://east/i-1", west, "east"}, // first match in configuration order
		{"mini://other/i-2", west, "west"},
		{"mini://other/i-3", nil, "<nobody>"}, // the scheme is ours, the node is not
		{"vsphere://vm-1", nil, "vsphere"},
		{"aws:///us-east-1a/i-4", nil, "<nobody>"},
		{"no-scheme", nil, "<nobody>"},
		{"", west, "west"},   // no ID yet: claimed by a node selector
		{"", nil, "vsphere"}, // no ID yet: the default node provider
	} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}, Spec: v1.NodeSpec{ProviderID: tc.providerID}}
		if got := name(set.ForNode(n)); got != tc.want {
			t.Errorf("ForNode(providerID %q, labels %v) = %s, want %s", tc.providerID, tc.labels, got, tc.want)
		}
	}

	for _, tc := range []struct {
		class *string
		want  string
	}{
		{nil, "east"},
		{ptr.To("example.com/east"), "east"},
		{ptr.To("example.com/vsphere"), "vsphere"},
		{ptr.To("example.com/someone-else"), "<nobody>"},
	} {
		svc := &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerClass: tc.class}}
		if got := name(set.ForService(svc)); got != tc.want {
			t.Errorf("ForService(class %v) = %s, want %s", ptr.Deref(tc.class, "<none>"), got, tc.want)
		}
	}

	if got := name(set.RoutesProvider()); got != "west" {
		t.Errorf("RoutesProvider = %s, want west", got)
	}
	var names []string
	for _, p := range set.Providers() {
		names = append(names, p.Name())
	}
	if strings.Join(names, ",") != "east,west,vsphere" {
		t.Errorf("Providers = %v, want configuration order", names)
	}
	if set.ProviderByName("west") == set.ProviderByName("east") {
		t.Error("two providers of one type share one instance")
	}
}

// With several providers and no defaults, nodes without ID, Services without class
// and routes are nobody's.
func TestCompositionWithoutDefaults(t *testing.T) {
	set, err := cloud.Build(parse(t, `
providers:
- {name: a, type: `+fakeType+`, cloudConfig: "scheme: a"}
- {name: b, type: `+fakeType+`, cloudConfig: "scheme: b"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := set.ForNode(&v1.Node{}); p != nil {
		t.Errorf("node without ID went to %s", p.Name())
	}
	if p := set.ForService(&v1.Service{}); p != nil {
		t.Errorf("Service without class went to %s", p.Name())
	}
	if p := set.RoutesProvider(); p != nil {
		t.Errorf("routes went to %s", p.Name())
	}
	if p := set.ForNode(&v1.Node{Spec: v1.NodeSpec{ProviderID: "b://x"}}); p == nil || p.Name() != "b" {
		t.Errorf("node b://x went to %v, want b", p)
	}
}

// A single provider without routes (or load balancers) is fine when the roles are
// only defaulted to it: the route controller just does not run, as upstream.
func TestBuildSingleProviderWithoutRoutes(t *testing.T) {
	set, err := cloud.Build(parse(t, `
providers:
- {name: a, type: `+fakeType+`, cloudConfig: "noRoutes: true"}
`))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if _, ok := set.RoutesProvider().Routes(); ok {
		t.Error("Routes supported by a provider that disabled them")
	}
}

// The plugin block of a provider of type "plugin" is validated with the
// provider's path; it is refused on other types.
func TestConfigPlugin(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		wantErr      []string
	}{
		{name: "unix socket", config: `
providers:
- name: p
  type: plugin
  plugin: {address: "unix:///run/stratus/p.sock"}`},
		{name: "missing block", config: `
providers:
- {name: p, type: plugin}`, wantErr: []string{`providers[0].plugin: required for type "plugin"`}},
		{name: "bad address, TCP without TLS", config: `
providers:
- {name: a, type: plugin, plugin: {address: "unix://relative"}}
- {name: b, type: plugin, plugin: {address: "10.0.0.1:9000"}}
- {name: c, type: plugin, plugin: {address: "10.0.0.1:9000", tls: {caFile: /ca.crt}}}`, wantErr: []string{
			`providers[0].plugin.address: "unix://relative": a unix address is unix:///absolute/path`,
			`providers[1].plugin.tls: required for a TCP address`,
			`providers[2].plugin.tls.certFile: required`,
			`providers[2].plugin.tls.keyFile: required`,
		}},
		{name: "block on another type", config: `
providers:
- {name: a, type: ` + fakeType + `, plugin: {address: "unix:///p.sock"}}`, wantErr: []string{`providers[0].plugin: only for type "plugin"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(t, tc.config).Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, cloud.ErrInvalidConfig) {
				t.Fatalf("Validate: %v; want an ErrInvalidConfig", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate: %v\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

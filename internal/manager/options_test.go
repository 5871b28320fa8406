package manager

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// parse registers the flags on a fresh flag set and parses args, as the command
// does.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("stratus-ccm", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	o.AddFlags(fs)
	return o, fs.Parse(args)
}

// TestDefaultFlags pins the upstream defaults (docs/flags.md) of every flag
// stratus acts on.
func TestDefaultFlags(t *testing.T) {
	got, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := &Options{
		ClusterName:               "kubernetes",
		ConfigureCloudRoutes:      true,
		RouteReconciliationPeriod: 10 * time.Second,
		NodeMonitorPeriod:         5 * time.Second,
		Controllers:               []string{"*"},
		MinResyncPeriod:           12 * time.Hour,
		KubeAPIQPS:                20,
		KubeAPIBurst:              30,
		KubeAPIContentType:        "application/vnd.kubernetes.protobuf",
		ConcurrentNodeSyncs:       20,
		ConcurrentServiceSyncs:    10,
		NodeStatusUpdateFrequency: 5 * time.Minute,
		LoadBalancerResyncPeriod:  10 * time.Minute,
		NodeDeletionGracePeriod:   time.Minute,
		LeaderElect:               true,
		LeaseDuration:             15 * time.Second,
		RenewDeadline:             10 * time.Second,
		RetryPeriod:               2 * time.Second,
		ResourceLock:              "leases",
		ResourceName:              "cloud-controller-manager",
		ResourceNamespace:         "kube-system",
		BindAddress:               "0.0.0.0",
		SecurePort:                10258,
		Profiling:                 true,
		WebhookBindAddress:        "0.0.0.0",
		WebhookSecurePort:         10260,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Options{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if set := got.IgnoredFlagsSet(); len(set) != 0 {
		t.Errorf("no flag given, but ignored flags reported as set: %v", set)
	}
}

// TestAddFlags checks that every flag parses into its field.
func TestAddFlags(t *testing.T) {
	got, err := parse(t,
		"--cloud-provider=fake", "--cloud-config=/etc/cloud.conf", "--config=/etc/stratus.yaml",
		"--kubeconfig=/k", "--master=https://api:6443", "--cluster-name=prod",
		"--cluster-cidr=10.244.0.0/16,fd00::/48", "--allocate-node-cidrs=true", "--configure-cloud-routes=false",
		"--route-reconciliation-period=30s", "--node-monitor-period=7s", "--controllers=*,-route",
		"--min-resync-period=1h", "--kube-api-qps=50", "--kube-api-burst=100", "--kube-api-content-type=application/json",
		"--concurrent-node-syncs=3", "--concurrent-node-status-updates=4", "--concurrent-service-syncs=5",
		"--node-status-update-frequency=1m", "--load-balancer-resync-period=2m", "--node-deletion-grace-period=3m",
		"--leader-elect=false", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s",
		"--leader-elect-retry-period=3s", "--leader-elect-resource-lock=leases",
		"--leader-elect-resource-name=ccm", "--leader-elect-resource-namespace=infra",
		"--bind-address=127.0.0.1", "--secure-port=10300", "--cert-dir=/certs", "--tls-cert-file=/c.crt",
		"--tls-private-key-file=/c.key", "--tls-cipher-suites=TLS_AES_128_GCM_SHA256", "--tls-min-version=VersionTLS13",
		"--authentication-kubeconfig=/authn", "--authorization-kubeconfig=/authz", "--version",
		"--webhooks=*,-x", "--webhook-bind-address=127.0.0.2", "--webhook-secure-port=10261", "--webhook-cert-dir=/wcerts",
		"--webhook-tls-cert-file=/w.crt", "--webhook-tls-private-key-file=/w.key", "--webhook-tls-cipher-suites=TLS_AES_256_GCM_SHA384",
		"--webhook-tls-min-version=VersionTLS13", "--webhook-disable-http2-serving",
	)
	if err != nil {
		t.Fatal(err)
	}
	want := &Options{
		CloudProvider: "fake", CloudConfig: "/etc/cloud.conf", ConfigFile: "/etc/stratus.yaml",
		Kubeconfig: "/k", Master: "https://api:6443", ClusterName: "prod",
		ClusterCIDR: "10.244.0.0/16,fd00::/48", AllocateNodeCIDRs: true, ConfigureCloudRoutes: false,
		RouteReconciliationPeriod: 30 * time.Second, NodeMonitorPeriod: 7 * time.Second, Controllers: []string{"*", "-route"},
		MinResyncPeriod: time.Hour, KubeAPIQPS: 50, KubeAPIBurst: 100, KubeAPIContentType: "application/json",
		ConcurrentNodeSyncs: 3, ConcurrentNodeStatusUpdates: 4, ConcurrentServiceSyncs: 5,
		NodeStatusUpdateFrequency: time.Minute, LoadBalancerResyncPeriod: 2 * time.Minute, NodeDeletionGracePeriod: 3 * time.Minute,
		LeaderElect: false, LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second,
		RetryPeriod: 3 * time.Second, ResourceLock: "leases", ResourceName: "ccm", ResourceNamespace: "infra",
		BindAddress: "127.0.0.1", SecurePort: 10300, Profiling: true, CertDir: "/certs", TLSCertFile: "/c.crt",
		TLSPrivateKeyFile: "/c.key", TLSCipherSuites: []string{"TLS_AES_128_GCM_SHA256"}, TLSMinVersion: "VersionTLS13",
		AuthenticationKubeconfig: "/authn", AuthorizationKubeconfig: "/authz", Version: true,
		Webhooks: []string{"*", "-x"}, WebhookBindAddress: "127.0.0.2", WebhookSecurePort: 10261, WebhookCertDir: "/wcerts",
		WebhookTLSCertFile: "/w.crt", WebhookTLSPrivateKeyFile: "/w.key", WebhookTLSCipherSuites: []string{"TLS_AES_256_GCM_SHA384"},
		WebhookTLSMinVersion: "VersionTLS13", WebhookDisableHTTP2: true,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Options{})); diff != "" {
		t.Errorf("parsed options (-want +got):\n%s", diff)
	}
}

func TestUnknownFlagIsAnError(t *testing.T) {
	if _, err := parse(t, "--cloud-provider=fake", "--no-such-flag=1"); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("err = %v, want an error naming --no-such-flag", err)
	}
}

// TestIgnoredFlags checks that upstream flags stratus does not act on are accepted
// and reported (for the one warning each) only when set.
func TestIgnoredFlags(t *testing.T) {
	o, err := parse(t, "--cloud-provider=fake", "--use-service-account-credentials", "--feature-gates=Foo=true",
		"--contention-profiling", "--webhook-tls-curve-preferences=X25519", "--requestheader-username-headers=x-user", "--allocate-node-cidrs",
		"--authorization-always-allow-paths=/healthz", "-v=2", "--vmodule=foo=3")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"use-service-account-credentials", "feature-gates", "contention-profiling", "requestheader-username-headers",
		"authorization-always-allow-paths", "webhook-tls-curve-preferences", "allocate-node-cidrs"}
	if diff := cmp.Diff(want, o.IgnoredFlagsSet(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("ignored flags set (-want +got):\n%s", diff)
	}
	if err := o.Validate(nil); err != nil {
		t.Errorf("ignored flags must not fail validation: %v", err)
	}
}

// TestFeatureGatesSyntax: --feature-gates takes what Kubernetes components take
// (Name=bool pairs, commas, repeats) and rejects anything else at parse time,
// naming the flag; the gates are then ignored.
func TestFeatureGatesSyntax(t *testing.T) {
	for _, ok := range [][]string{
		{"--feature-gates=Foo=true"},
		{"--feature-gates=Foo=true,Bar=false"},
		{"--feature-gates= Foo = 1 , Bar=F,"},
		{"--feature-gates=Foo=true", "--feature-gates=AllAlpha=false"},
	} {
		o, err := parse(t, ok...)
		if err != nil {
			t.Errorf("%v: %v", ok, err)
			continue
		}
		if !slices.Contains(o.IgnoredFlagsSet(), "feature-gates") {
			t.Errorf("%v: feature-gates not reported as ignored", ok)
		}
	}
	for _, tc := range []struct{ value, want string }{
		{"garbage!!", `"garbage!!" is not a feature gate name`},
		{"Foo", "missing bool value for Foo"},
		{"Foo=yes", "invalid value of Foo=yes"},
		{"Foo=true,=false", `"" is not a feature gate name`},
		{"Foo=true;Bar=false", "invalid value of Foo=true;Bar=false"},
	} {
		_, err := parse(t, "--feature-gates="+tc.value)
		if err == nil || !strings.Contains(err.Error(), "--feature-gates") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--feature-gates=%s: err = %v, want one naming the flag and saying %s", tc.value, err, tc.want)
		}
	}
}

// TestValidate lists rejected values; each error must name its flag. Valid
// command lines validate cleanly.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error; none = valid
	}{
		{name: "minimal", args: []string{"--cloud-provider=fake"}},
		{name: "dual-stack cluster cidr", args: []string{"--cloud-provider=fake", "--cluster-cidr=10.0.0.0/8,fd00::/48"}},
		{name: "leader election off ignores lock checks", args: []string{"--cloud-provider=fake", "--leader-elect=false", "--leader-elect-resource-lock=endpoints"}},
		{name: "serving off ignores serving checks", args: []string{"--cloud-provider=fake", "--secure-port=0", "--bind-address=nope"}},
		{name: "controllers with aliases", args: []string{"--cloud-provider=fake", "--controllers=cloud-node,-route,service-lb-controller"}},
		{name: "no provider", args: nil, want: []string{"--cloud-provider: required"}},
		{name: "unknown controller", args: []string{"--cloud-provider=fake", "--controllers=*,nodeipam"}, want: []string{`--controllers: unknown controller "nodeipam"`}},
		{name: "unknown disabled controller", args: []string{"--cloud-provider=fake", "--controllers=-bogus"}, want: []string{`"-bogus"`}},
		{name: "zero node workers", args: []string{"--cloud-provider=fake", "--concurrent-node-syncs=0"}, want: []string{"--concurrent-node-syncs must be at least 1"}},
		{name: "negative service workers", args: []string{"--cloud-provider=fake", "--concurrent-service-syncs=-1"}, want: []string{"--concurrent-service-syncs must be at least 1"}},
		{name: "negative status workers", args: []string{"--cloud-provider=fake", "--concurrent-node-status-updates=-1"}, want: []string{"--concurrent-node-status-updates"}},
		{name: "bad cluster cidr", args: []string{"--cloud-provider=fake", "--cluster-cidr=10.0.0.0/33"}, want: []string{"--cluster-cidr"}},
		{name: "three cluster cidrs", args: []string{"--cloud-provider=fake", "--cluster-cidr=10.0.0.0/8,10.1.0.0/16,fd00::/48"}, want: []string{"--cluster-cidr"}},
		{name: "zero period", args: []string{"--cloud-provider=fake", "--route-reconciliation-period=0s"}, want: []string{"--route-reconciliation-period must be positive"}},
		{name: "lock type", args: []string{"--cloud-provider=fake", "--leader-elect-resource-lock=endpoints"}, want: []string{"--leader-elect-resource-lock"}},
		{name: "lease shorter than renew", args: []string{"--cloud-provider=fake", "--leader-elect-lease-duration=5s"}, want: []string{"--leader-elect-lease-duration"}},
		{name: "renew too close to retry", args: []string{"--cloud-provider=fake", "--leader-elect-retry-period=9s"}, want: []string{"--leader-elect-renew-deadline"}},
		{name: "port out of range", args: []string{"--cloud-provider=fake", "--secure-port=70000"}, want: []string{"--secure-port"}},
		{name: "bind address", args: []string{"--cloud-provider=fake", "--bind-address=localhost"}, want: []string{"--bind-address"}},
		{name: "cert without key", args: []string{"--cloud-provider=fake", "--tls-cert-file=/a"}, want: []string{"--tls-cert-file and --tls-private-key-file"}},
		{name: "tls version", args: []string{"--cloud-provider=fake", "--tls-min-version=TLS9"}, want: []string{"--tls-min-version"}},
		{name: "cipher", args: []string{"--cloud-provider=fake", "--tls-cipher-suites=NOPE"}, want: []string{"--tls-cipher-suites"}},
		{name: "content type", args: []string{"--cloud-provider=fake", "--kube-api-content-type=text/plain"}, want: []string{"--kube-api-content-type"}},
		{name: "qps", args: []string{"--cloud-provider=fake", "--kube-api-qps=0"}, want: []string{"--kube-api-qps"}},
		{name: "webhooks", args: []string{"--cloud-provider=fake", "--webhooks=service-load-balancer", "--webhook-cert-dir=/tmp"}},
		{name: "webhooks off ignore webhook serving checks", args: []string{"--cloud-provider=fake", "--webhooks=-service-load-balancer,*", "--webhook-bind-address=nope"}},
		{name: "webhook port 0 ignores webhook serving checks", args: []string{"--cloud-provider=fake", "--webhooks=*", "--webhook-secure-port=0", "--webhook-bind-address=nope"}},
		{name: "unknown webhook", args: []string{"--cloud-provider=fake", "--webhooks=*,service-lb"}, want: []string{`--webhooks: unknown webhook "service-lb" (known: *, service-load-balancer`}},
		{name: "webhook port is the secure port", args: []string{"--cloud-provider=fake", "--webhooks=*", "--webhook-secure-port=10258"}, want: []string{"--webhook-secure-port 10258 is also --secure-port"}},
		{name: "webhook port out of range", args: []string{"--cloud-provider=fake", "--webhook-secure-port=70000"}, want: []string{"--webhook-secure-port 70000"}},
		{name: "webhook bind address", args: []string{"--cloud-provider=fake", "--webhooks=*", "--webhook-bind-address=localhost"}, want: []string{"--webhook-bind-address"}},
		{name: "webhook cert without key", args: []string{"--cloud-provider=fake", "--webhooks=*", "--webhook-tls-private-key-file=/a"}, want: []string{"--webhook-tls-cert-file and --webhook-tls-private-key-file"}},
		{name: "webhook tls version", args: []string{"--cloud-provider=fake", "--webhooks=*", "--webhook-tls-min-version=TLS9"}, want: []string{"--webhook-tls-min-version"}},
		{name: "webhook cipher", args: []string{"--cloud-provider=fake", "--webhooks=*", "--webhook-tls-cipher-suites=NOPE"}, want: []string{"--webhook-tls-cipher-suites"}},
		{
			name: "errors are aggregated",
			args: []string{"--controllers=bogus", "--concurrent-node-syncs=0", "--secure-port=-1"},
			want: []string{"--cloud-provider", "--controllers", "--concurrent-node-syncs", "--secure-port"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(t, tc.args...)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = o.Validate(nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %v", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestValidateWithConfig covers the interplay of --cloud-provider and the
// providers of --config.
func TestValidateWithConfig(t *testing.T) {
	composed := &Config{}
	composed.Providers = append(composed.Providers, cloud.ProviderConfig{Name: "a", Type: "fake"})
	settingsOnly := &Config{}
	for _, tc := range []struct {
		name    string
		args    []string
		cfg     *Config
		wantErr string
	}{
		{name: "providers from config", args: nil, cfg: composed},
		{name: "flag with settings-only config", args: []string{"--cloud-provider=fake"}, cfg: settingsOnly},
		{name: "both", args: []string{"--cloud-provider=fake"}, cfg: composed, wantErr: "exclusive"},
		{name: "cloud-config with composition", args: []string{"--cloud-config=/x"}, cfg: composed, wantErr: "--cloud-config"},
		{name: "neither", args: nil, cfg: settingsOnly, wantErr: "--cloud-provider: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = o.Validate(tc.cfg)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestFlagsDocumented: docs/flags.md names every flag the binary registers.
func TestFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("stratus-ccm", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		name := "`--" + f.Name + "`"
		if len(f.Name) == 1 {
			name = "`-" + f.Name + "`"
		}
		if !strings.Contains(string(doc), name) {
			t.Errorf("docs/flags.md does not document %s", name)
		}
	})
}

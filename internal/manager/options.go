package manager

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/node"
	"github.com/stratus-ccm/stratus/internal/controller/route"
	"github.com/stratus-ccm/stratus/internal/controller/service"
)

// Defaults of the upstream cloud-controller-manager flags (docs/flags.md); the
// worker counts are ours (docs/flags.md).
const (
	DefaultRouteReconciliationPeriod  = 10 * time.Second
	DefaultNodeMonitorPeriod          = 5 * time.Second
	DefaultMinResyncPeriod            = 12 * time.Hour
	DefaultKubeAPIQPS                 = 20
	DefaultKubeAPIBurst               = 30
	DefaultKubeAPIContentType         = "application/vnd.kubernetes.protobuf"
	DefaultLeaseDuration              = 15 * time.Second
	DefaultRenewDeadline              = 10 * time.Second
	DefaultRetryPeriod                = 2 * time.Second
	DefaultLeaderElectResourceLock    = "leases"
	DefaultLeaderElectResourceName    = "cloud-controller-manager"
	DefaultLeaderElectNamespace       = "kube-system"
	DefaultConcurrentNodeSyncs        = node.DefaultWorkers
	DefaultConcurrentServiceSyncs     = service.DefaultWorkers
	DefaultNodeStatusUpdateFrequency  = 5 * time.Minute
	DefaultLoadBalancerResyncPeriod   = 10 * time.Minute
	DefaultNodeDeletionGracePeriod    = time.Minute
	DefaultBindAddress                = "0.0.0.0"
	DefaultSecurePort                 = 10258
	DefaultControllerStartInterval    = 0
	DefaultCIDRAllocatorType          = "RangeAllocator"
	DefaultAuthorizationAlwaysAllowed = "/healthz,/readyz,/livez"
	DefaultWebhookBindAddress         = "0.0.0.0"
	DefaultWebhookSecurePort          = 10260
)

// Options holds the command-line flags of stratus-ccm: the upstream
// cloud-controller-manager flags under their exact names and defaults, plus
// --config and --load-balancer-resync-period. Fields hold flags stratus acts on;
// flags it accepts but ignores are registered by AddFlags and reported by
// IgnoredFlagsSet.
type Options struct {
	// CloudProvider is --cloud-provider: the registered provider to run when no
	// --config composes several.
	CloudProvider string
	// CloudConfig is --cloud-config: the provider's configuration file.
	CloudConfig string
	// ConfigFile is --config: the ManagerConfig file (stratus only).
	ConfigFile string
	// Kubeconfig is --kubeconfig; empty means in-cluster configuration.
	Kubeconfig string
	// Master is --master: overrides the API server address of the kubeconfig.
	Master string
	// ClusterName is --cluster-name (default "kubernetes"), passed to every load
	// balancer and route call.
	ClusterName string
	// ClusterCIDR is --cluster-cidr: one CIDR or a dual-stack pair for the route
	// controller, parsed by route.ParseClusterCIDRs.
	ClusterCIDR string
	// AllocateNodeCIDRs is --allocate-node-cidrs (default false). stratus has no
	// node IPAM controller; true only logs a warning.
	AllocateNodeCIDRs bool
	// ConfigureCloudRoutes is --configure-cloud-routes (default true); false keeps
	// the route controller from starting.
	ConfigureCloudRoutes bool
	// RouteReconciliationPeriod is --route-reconciliation-period (default 10s).
	RouteReconciliationPeriod time.Duration
	// NodeMonitorPeriod is --node-monitor-period (default 5s): how often the node
	// lifecycle controller checks nodes.
	NodeMonitorPeriod time.Duration
	// Controllers is --controllers (default "*"), upstream semantics.
	Controllers []string
	// MinResyncPeriod is --min-resync-period (default 12h): the informers' resync
	// period.
	MinResyncPeriod time.Duration
	// KubeAPIQPS is --kube-api-qps (default 20).
	KubeAPIQPS float32
	// KubeAPIBurst is --kube-api-burst (default 30).
	KubeAPIBurst int
	// KubeAPIContentType is --kube-api-content-type (default protobuf).
	KubeAPIContentType string
	// ConcurrentNodeSyncs is --concurrent-node-syncs (default 20, upstream 1): cloud node
	// controller workers.
	ConcurrentNodeSyncs int
	// ConcurrentNodeStatusUpdates is --concurrent-node-status-updates (default 0 =
	// --concurrent-node-syncs): workers of the periodic node address update.
	ConcurrentNodeStatusUpdates int
	// ConcurrentServiceSyncs is --concurrent-service-syncs (default 10, upstream 1): service
	// controller workers.
	ConcurrentServiceSyncs int
	// NodeStatusUpdateFrequency is --node-status-update-frequency (default 5m):
	// how often initialized nodes' addresses are refreshed from the cloud.
	NodeStatusUpdateFrequency time.Duration
	// NodeDeletionGracePeriod is --node-deletion-grace-period (default 1m, stratus
	// only): how long a node must be NotReady before it may be deleted.
	NodeDeletionGracePeriod time.Duration
	// LoadBalancerResyncPeriod is --load-balancer-resync-period (default 10m,
	// stratus only): how often load balancers are checked for drift and orphans.
	LoadBalancerResyncPeriod time.Duration

	// LeaderElect is --leader-elect (default true).
	LeaderElect bool
	// LeaseDuration is --leader-elect-lease-duration (default 15s).
	LeaseDuration time.Duration
	// RenewDeadline is --leader-elect-renew-deadline (default 10s).
	RenewDeadline time.Duration
	// RetryPeriod is --leader-elect-retry-period (default 2s).
	RetryPeriod time.Duration
	// ResourceLock is --leader-elect-resource-lock; only "leases" is accepted.
	ResourceLock string
	// ResourceName is --leader-elect-resource-name (default
	// "cloud-controller-manager").
	ResourceName string
	// ResourceNamespace is --leader-elect-resource-namespace (default
	// "kube-system").
	ResourceNamespace string

	// BindAddress is --bind-address (default 0.0.0.0) of the secure port.
	BindAddress string
	// SecurePort is --secure-port (default 10258); 0 disables serving.
	SecurePort int
	// Profiling is --profiling (default true, as upstream): net/http/pprof's
	// handlers under /debug/pprof/ on the secure port, behind the same
	// authentication and authorization as /metrics.
	Profiling bool
	// CertDir is --cert-dir: where self-signed serving certificates are kept when
	// --tls-cert-file is not given; empty keeps them in memory.
	CertDir string
	// TLSCertFile is --tls-cert-file.
	TLSCertFile string
	// TLSPrivateKeyFile is --tls-private-key-file.
	TLSPrivateKeyFile string
	// TLSCipherSuites is --tls-cipher-suites (IANA names); empty means Go's
	// defaults.
	TLSCipherSuites []string
	// TLSMinVersion is --tls-min-version (e.g. VersionTLS12); empty means TLS 1.2.
	TLSMinVersion string
	// AuthenticationKubeconfig is --authentication-kubeconfig: the API server that
	// reviews tokens (TokenReview); empty means the --kubeconfig one.
	AuthenticationKubeconfig string
	// AuthorizationKubeconfig is --authorization-kubeconfig: the API server that
	// authorizes requests (SubjectAccessReview); empty means the
	// --authentication-kubeconfig one, or the --kubeconfig one.
	AuthorizationKubeconfig string

	// Webhooks is --webhooks: the admission webhooks to serve, with the
	// --controllers semantics ("*", "name", "-name") but off unless listed,
	// as upstream's.
	Webhooks []string
	// WebhookBindAddress is --webhook-bind-address (default 0.0.0.0).
	WebhookBindAddress string
	// WebhookSecurePort is --webhook-secure-port (default 10260); 0 serves no
	// webhook.
	WebhookSecurePort int
	// WebhookCertDir is --webhook-cert-dir: where the webhook's self-signed
	// certificate is kept when --webhook-tls-cert-file is not given (in
	// memory when empty).
	WebhookCertDir string
	// WebhookTLSCertFile and WebhookTLSPrivateKeyFile are the webhook's
	// serving certificate, reloaded when the files change.
	WebhookTLSCertFile       string
	WebhookTLSPrivateKeyFile string
	// WebhookTLSCipherSuites is --webhook-tls-cipher-suites.
	WebhookTLSCipherSuites []string
	// WebhookTLSMinVersion is --webhook-tls-min-version (TLS 1.2 when empty).
	WebhookTLSMinVersion string
	// WebhookDisableHTTP2 is --webhook-disable-http2-serving.
	WebhookDisableHTTP2 bool

	// Version is --version: print the version and exit.
	Version bool

	// fs is the flag set AddFlags registered on, to tell which ignored flags were
	// set.
	fs *pflag.FlagSet
	// stepAside: no client-side limit on Kubernetes API requests
	// (decideKubeAPILimit).
	stepAside bool
}

// NewOptions returns the options with upstream's defaults.
func NewOptions() *Options {
	return &Options{
		ClusterName:               cloud.DefaultClusterName,
		ConfigureCloudRoutes:      true,
		RouteReconciliationPeriod: DefaultRouteReconciliationPeriod,
		NodeMonitorPeriod:         DefaultNodeMonitorPeriod,
		Controllers:               []string{"*"},
		MinResyncPeriod:           DefaultMinResyncPeriod,
		KubeAPIQPS:                DefaultKubeAPIQPS,
		KubeAPIBurst:              DefaultKubeAPIBurst,
		KubeAPIContentType:        DefaultKubeAPIContentType,
		ConcurrentNodeSyncs:       DefaultConcurrentNodeSyncs,
		ConcurrentServiceSyncs:    DefaultConcurrentServiceSyncs,
		NodeStatusUpdateFrequency: DefaultNodeStatusUpdateFrequency,
		LoadBalancerResyncPeriod:  DefaultLoadBalancerResyncPeriod,
		NodeDeletionGracePeriod:   DefaultNodeDeletionGracePeriod,
		LeaderElect:               true,
		LeaseDuration:             DefaultLeaseDuration,
		RenewDeadline:             DefaultRenewDeadline,
		RetryPeriod:               DefaultRetryPeriod,
		ResourceLock:              DefaultLeaderElectResourceLock,
		ResourceName:              DefaultLeaderElectResourceName,
		ResourceNamespace:         DefaultLeaderElectNamespace,
		BindAddress:               DefaultBindAddress,
		SecurePort:                DefaultSecurePort,
		Profiling:                 true,
		WebhookBindAddress:        DefaultWebhookBindAddress,
		WebhookSecurePort:         DefaultWebhookSecurePort,
	}
}

// AddFlags registers every flag on fs: the ones stratus acts on (bound to o), the
// upstream ones it accepts and ignores, and the klog flags -v and --vmodule.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider, "The provider for cloud services. Required unless --config lists providers.")
	fs.StringVar(&o.CloudConfig, "cloud-config", o.CloudConfig, "The path to the cloud provider configuration file. Empty string for no configuration file.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The path to a stratus ManagerConfig file (apiVersion stratus.io/v1alpha1): several providers, budgets, stratus-only settings.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to kubeconfig file with authorization and master location information (the in-cluster configuration if empty).")
	fs.StringVar(&o.Master, "master", o.Master, "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "The instance prefix for the cluster.")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "CIDR Range for Pods in cluster (one CIDR or a dual-stack pair), used by the route controller.")
	fs.BoolVar(&o.AllocateNodeCIDRs, "allocate-node-cidrs", o.AllocateNodeCIDRs, "Should CIDRs for Pods be allocated and set on the cloud provider. stratus has no node IPAM controller: ignored.")
	fs.BoolVar(&o.ConfigureCloudRoutes, "configure-cloud-routes", o.ConfigureCloudRoutes, "Should CIDRs allocated to nodes be configured on the cloud provider.")
	fs.DurationVar(&o.RouteReconciliationPeriod, "route-reconciliation-period", o.RouteReconciliationPeriod, "The period for reconciling routes created for Nodes by cloud provider.")
	fs.DurationVar(&o.NodeMonitorPeriod, "node-monitor-period", o.NodeMonitorPeriod, "The period for syncing NodeStatus in the cloud node lifecycle controller.")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, fmt.Sprintf(
		"A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'.\nAll controllers: %v", ControllerNames))
	fs.DurationVar(&o.MinResyncPeriod, "min-resync-period", o.MinResyncPeriod, "The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to use while talking with kubernetes apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to use while talking with kubernetes apiserver.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, "Content type of requests sent to apiserver.")
	fs.IntVar(&o.ConcurrentNodeSyncs, "concurrent-node-syncs", o.ConcurrentNodeSyncs, "Number of workers concurrently synchronizing nodes.")
	fs.IntVar(&o.ConcurrentNodeStatusUpdates, "concurrent-node-status-updates", o.ConcurrentNodeStatusUpdates, "Number of workers concurrently updating node statuses. If unspecified or 0, --concurrent-node-syncs is used instead.")
	fs.IntVar(&o.ConcurrentServiceSyncs, "concurrent-service-syncs", o.ConcurrentServiceSyncs, "The number of services that are allowed to sync concurrently.")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", o.NodeStatusUpdateFrequency, "Specifies how often the controller updates nodes' status.")
	fs.DurationVar(&o.NodeDeletionGracePeriod, "node-deletion-grace-period", o.NodeDeletionGracePeriod, "How long a node must be NotReady before the node lifecycle controller may delete it (stratus only).")
	fs.DurationVar(&o.LoadBalancerResyncPeriod, "load-balancer-resync-period", o.LoadBalancerResyncPeriod, "How often every load balancer is checked for drift and orphans (stratus only).")

	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Start a leader election client and gain leadership before executing the main loop.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "The interval between attempts by the acting master to renew a leadership slot before it stops leading.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "The duration the clients should wait between attempting acquisition and renewal of a leadership.")
	fs.StringVar(&o.ResourceLock, "leader-elect-resource-lock", o.ResourceLock, "The type of resource object that is used for locking during leader election. Supported options are 'leases'.")
	fs.StringVar(&o.ResourceName, "leader-elect-resource-name", o.ResourceName, "The name of resource object that is used for locking during leader election.")
	fs.StringVar(&o.ResourceNamespace, "leader-elect-resource-namespace", o.ResourceNamespace, "The namespace of resource object that is used for locking during leader election.")

	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "The IP address on which to listen for the --secure-port port.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Enable profiling via web interface host:port/debug/pprof/ on the secure port (authenticated and authorized as /metrics).")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "File containing the default x509 Certificate for HTTPS.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "File containing the default x509 private key matching --tls-cert-file.")
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", o.TLSCipherSuites, "Comma-separated list of cipher suites for the server. If omitted, the default Go cipher suites will be used.")
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", o.TLSMinVersion, fmt.Sprintf("Minimum TLS version supported. Possible values: %v", cliflag.TLSPossibleVersions()))
	fs.StringVar(&o.AuthenticationKubeconfig, "authentication-kubeconfig", o.AuthenticationKubeconfig, "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io. Optional: the --kubeconfig server is used otherwise.")
	fs.StringVar(&o.AuthorizationKubeconfig, "authorization-kubeconfig", o.AuthorizationKubeconfig, "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. Optional: the --kubeconfig server is used otherwise.")

	fs.StringSliceVar(&o.Webhooks, "webhooks", o.Webhooks, fmt.Sprintf(
		"A list of webhooks to enable. '*' enables all webhooks, 'foo' enables the webhook named 'foo', '-foo' disables the webhook named 'foo'. All webhooks are off unless listed.\nAll webhooks: %v", WebhookNames))
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress, "The IP address on which to listen for the --webhook-secure-port port.")
	fs.IntVar(&o.WebhookSecurePort, "webhook-secure-port", o.WebhookSecurePort, "Secure port to serve cloud provider webhooks. If 0, don't serve webhooks at all.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "The directory where the webhook's TLS certs are located. If --webhook-tls-cert-file and --webhook-tls-private-key-file are provided, this flag will be ignored.")
	fs.StringVar(&o.WebhookTLSCertFile, "webhook-tls-cert-file", o.WebhookTLSCertFile, "File containing the x509 certificate for the webhook's HTTPS (reloaded when it changes).")
	fs.StringVar(&o.WebhookTLSPrivateKeyFile, "webhook-tls-private-key-file", o.WebhookTLSPrivateKeyFile, "File containing the x509 private key matching --webhook-tls-cert-file.")
	fs.StringSliceVar(&o.WebhookTLSCipherSuites, "webhook-tls-cipher-suites", o.WebhookTLSCipherSuites, "Comma-separated list of cipher suites for the webhook server. If omitted, the default Go cipher suites will be used.")
	fs.StringVar(&o.WebhookTLSMinVersion, "webhook-tls-min-version", o.WebhookTLSMinVersion, fmt.Sprintf("Minimum TLS version of the webhook server. Possible values: %v", cliflag.TLSPossibleVersions()))
	fs.BoolVar(&o.WebhookDisableHTTP2, "webhook-disable-http2-serving", o.WebhookDisableHTTP2, "If true, HTTP2 serving will be disabled on the webhook port.")

	fs.BoolVar(&o.Version, "version", false, "Print version information and quit.")

	for _, f := range ignoredFlags {
		f.register(fs)
	}
	// -v and --vmodule are klog's; controller-runtime logs through klog.
	gofs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(gofs)
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(gofs.Lookup(name))
	}
}

// ignoredFlag is an upstream flag stratus accepts so that existing manifests keep
// working, but does not act on.
type ignoredFlag struct {
	name, usage string
	register    func(fs *pflag.FlagSet)
}

func ignoredBool(name string, def bool, usage string) ignoredFlag {
	return ignoredFlag{name, usage, func(fs *pflag.FlagSet) { fs.Bool(name, def, usage) }}
}

func ignoredString(name, def, usage string) ignoredFlag {
	return ignoredFlag{name, usage, func(fs *pflag.FlagSet) { fs.String(name, def, usage) }}
}

func ignoredStrings(name string, def []string, usage string) ignoredFlag {
	return ignoredFlag{name, usage, func(fs *pflag.FlagSet) { fs.StringSlice(name, def, usage) }}
}

func ignoredDuration(name string, def time.Duration, usage string) ignoredFlag {
	return ignoredFlag{name, usage, func(fs *pflag.FlagSet) { fs.Duration(name, def, usage) }}
}

func ignoredInt(name string, def int, usage string) ignoredFlag {
	return ignoredFlag{name, usage, func(fs *pflag.FlagSet) { fs.Int(name, def, usage) }}
}

// ignoredFlags are the upstream flags (docs/flags.md) stratus accepts and ignores;
// docs/flags.md says why for each.
var ignoredFlags = []ignoredFlag{
	ignoredString("cidr-allocator-type", DefaultCIDRAllocatorType, "Type of CIDR allocator to use (ignored: stratus has no node IPAM controller)."),
	ignoredDuration("node-sync-period", 0, "Deprecated upstream no-op (ignored)."),
	ignoredBool("allow-untagged-cloud", false, "Deprecated upstream (ignored)."),
	ignoredBool("use-service-account-credentials", false, "Use individual service account credentials for each controller (ignored: all controllers use the manager's identity)."),
	ignoredString("external-cloud-volume-plugin", "", "The plugin to use when cloud provider is set to external (ignored)."),
	{"feature-gates", featureGatesUsage, func(fs *pflag.FlagSet) { fs.Var(featureGates{}, "feature-gates", featureGatesUsage) }},
	ignoredDuration("controller-start-interval", DefaultControllerStartInterval, "Interval between starting controller managers (ignored)."),
	ignoredBool("enable-leader-migration", false, "Enable leader migration (ignored)."),
	ignoredString("leader-migration-config", "", "Path to the config file for controller leader migration (ignored)."),
	ignoredBool("contention-profiling", false, "Enable block profiling (ignored)."),
	ignoredStrings("tls-sni-cert-key", nil, "SNI certificate/key pairs (ignored)."),
	ignoredInt("http2-max-streams-per-connection", 0, "HTTP/2 max streams per connection (ignored: Go's default)."),
	ignoredBool("authentication-skip-lookup", false, "Skip the client CA lookup (ignored: no client certificate authentication)."),
	ignoredDuration("authentication-token-webhook-cache-ttl", 10*time.Second, "Token review cache TTL (ignored)."),
	ignoredBool("authentication-tolerate-lookup-failure", false, "Tolerate client CA lookup failure (ignored)."),
	ignoredString("client-ca-file", "", "Client certificate authority (ignored: bearer tokens only)."),
	ignoredString("requestheader-client-ca-file", "", "Request header client CA (ignored)."),
	ignoredStrings("requestheader-allowed-names", nil, "Request header allowed names (ignored)."),
	ignoredStrings("requestheader-username-headers", []string{"x-remote-user"}, "Request header user names (ignored)."),
	ignoredStrings("requestheader-uid-headers", nil, "Request header UIDs (ignored)."),
	ignoredStrings("requestheader-group-headers", []string{"x-remote-group"}, "Request header groups (ignored)."),
	ignoredStrings("requestheader-extra-headers-prefix", []string{"x-remote-extra-"}, "Request header extra prefixes (ignored)."),
	ignoredStrings("authorization-always-allow-paths", []string{"/healthz", "/readyz", "/livez"}, "Paths served without authorization (ignored: always /healthz, /readyz, /livez)."),
	ignoredDuration("authorization-webhook-cache-authorized-ttl", 10*time.Second, "Authorized cache TTL (ignored)."),
	ignoredDuration("authorization-webhook-cache-unauthorized-ttl", 10*time.Second, "Unauthorized cache TTL (ignored)."),
	ignoredStrings("webhook-tls-curve-preferences", nil, "Webhook curves (ignored: Go's defaults)."),
	ignoredStrings("webhook-tls-sni-cert-key", nil, "Webhook SNI pairs (ignored)."),
	ignoredString("logging-format", "text", "Log format (ignored: always text)."),
}

// IgnoredFlagsSet returns the names of accepted-but-ignored flags the command line
// set, including --allocate-node-cidrs=true.
func (o *Options) IgnoredFlagsSet() []string {
	if o.fs == nil {
		return nil
	}
	var set []string
	for _, f := range ignoredFlags {
		if o.fs.Changed(f.name) {
			set = append(set, f.name)
		}
	}
	if o.AllocateNodeCIDRs {
		set = append(set, "allocate-node-cidrs")
	}
	return set
}

// WarnIgnoredFlags logs one warning (klog's warning severity, as Kubernetes
// components warn about flags) per accepted-but-ignored flag that was set.
func (o *Options) WarnIgnoredFlags() {
	for _, name := range o.IgnoredFlagsSet() {
		klog.Warningf("flag --%s is accepted for compatibility with the upstream cloud-controller-manager but has no effect in stratus; see docs/flags.md", name)
	}
}

const featureGatesUsage = "A set of key=value pairs that describe feature gates for alpha/experimental features, e.g. Foo=true,Bar=false " +
	"(syntax checked, then ignored: stratus has no upstream feature-gated behavior)."

// featureGates is --feature-gates: it checks the syntax Kubernetes components
// accept (comma-separated Name=bool pairs; repeated flags add up) so that a
// malformed value fails at start-up as it would upstream, and keeps nothing,
// since stratus has no gates. Gate names are not checked against a list: the
// upstream list is not stratus's to know.
type featureGates map[string]bool

// featureGateNameRE is the shape of Kubernetes feature gate names.
var featureGateNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// Set parses one --feature-gates value.
func (g featureGates) Set(value string) error {
	for _, pair := range strings.Split(value, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, val, ok := strings.Cut(pair, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !featureGateNameRE.MatchString(name) {
			return fmt.Errorf("%q is not a feature gate name (letters and digits, e.g. Foo=true)", name)
		}
		if !ok {
			return fmt.Errorf("missing bool value for %s (want %s=true or %s=false)", name, name, name)
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("invalid value of %s=%s: want true or false", name, val)
		}
		g[name] = b
	}
	return nil
}

// String lists the gates set, sorted.
func (g featureGates) String() string {
	pairs := make([]string, 0, len(g))
	for name, b := range g {
		pairs = append(pairs, fmt.Sprintf("%s=%t", name, b))
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// Type names the value in --help, as Kubernetes components do.
func (featureGates) Type() string { return "mapStringBool" }

// Validate checks every flag and returns all problems at once, each naming its
// flag. cfg is the loaded --config file, or nil.
func (o *Options) Validate(cfg *Config) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	composed := cfg != nil && len(cfg.Providers) > 0
	switch {
	case o.CloudProvider == "" && !composed:
		add("--cloud-provider: required (or list providers in the --config file)")
	case o.CloudProvider != "" && composed:
		add("--cloud-provider %q and the providers of --config %s are exclusive: use one", o.CloudProvider, o.ConfigFile)
	case o.CloudConfig != "" && composed:
		add("--cloud-config is for --cloud-provider; with --config set cloudConfigFile per provider")
	}
	if err := validateControllers(o.Controllers); err != nil {
		errs = append(errs, err)
	}
	if o.ClusterCIDR != "" {
		if _, err := route.ParseClusterCIDRs(o.ClusterCIDR); err != nil {
			errs = append(errs, err)
		}
	}
	for _, w := range []struct {
		flag  string
		value int
	}{
		{"--concurrent-node-syncs", o.ConcurrentNodeSyncs},
		{"--concurrent-service-syncs", o.ConcurrentServiceSyncs},
	} {
		if w.value < 1 {
			add("%s must be at least 1, got %d", w.flag, w.value)
		}
	}
	if o.ConcurrentNodeStatusUpdates < 0 {
		add("--concurrent-node-status-updates must not be negative, got %d", o.ConcurrentNodeStatusUpdates)
	}
	for _, p := range []struct {
		flag  string
		value time.Duration
	}{
		{"--route-reconciliation-period", o.RouteReconciliationPeriod},
		{"--node-monitor-period", o.NodeMonitorPeriod},
		{"--node-status-update-frequency", o.NodeStatusUpdateFrequency},
		{"--min-resync-period", o.MinResyncPeriod},
		{"--load-balancer-resync-period", o.LoadBalancerResyncPeriod},
		{"--node-deletion-grace-period", o.NodeDeletionGracePeriod},
	} {
		if p.value <= 0 {
			add("%s must be positive, got %s", p.flag, p.value)
		}
	}
	if o.KubeAPIQPS <= 0 {
		add("--kube-api-qps must be positive, got %v", o.KubeAPIQPS)
	}
	if o.KubeAPIBurst < 1 {
		add("--kube-api-burst must be at least 1, got %d", o.KubeAPIBurst)
	}
	switch o.KubeAPIContentType {
	case "application/json", "application/vnd.kubernetes.protobuf":
	default:
		add("--kube-api-content-type %q: want application/json or application/vnd.kubernetes.protobuf", o.KubeAPIContentType)
	}
	if o.LeaderElect {
		errs = append(errs, o.validateLeaderElection()...)
	}
	errs = append(errs, o.validateServing()...)
	errs = append(errs, o.validateWebhooks()...)
	return errors.Join(errs...)
}

func (o *Options) validateLeaderElection() []error {
	var errs []error
	if o.ResourceLock != DefaultLeaderElectResourceLock {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock %q: only %q is supported", o.ResourceLock, DefaultLeaderElectResourceLock))
	}
	if o.ResourceName == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name must not be empty"))
	}
	if o.ResourceNamespace == "" {
		errs = append(errs, errors.New("--leader-elect-resource-namespace must not be empty"))
	}
	if o.RetryPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period must be positive, got %s", o.RetryPeriod))
	}
	// client-go's leader elector requires lease > renew > 1.2 × retry.
	if o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", o.LeaseDuration, o.RenewDeadline))
	}
	if float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than 1.2 × --leader-elect-retry-period (%s)", o.RenewDeadline, o.RetryPeriod))
	}
	return errs
}

func (o *Options) validateServing() []error {
	var errs []error
	if o.SecurePort < 0 || o.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 0 (disabled) and 65535", o.SecurePort))
	}
	if o.SecurePort == 0 {
		return errs
	}
	if net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress))
	}
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file must be given together"))
	}
	if o.TLSMinVersion != "" {
		if _, err := cliflag.TLSVersion(o.TLSMinVersion); err != nil {
			errs = append(errs, fmt.Errorf("--tls-min-version: %w", err))
		}
	}
	if len(o.TLSCipherSuites) > 0 {
		if _, err := cliflag.TLSCipherSuites(o.TLSCipherSuites); err != nil {
			errs = append(errs, fmt.Errorf("--tls-cipher-suites: %w", err))
		}
	}
	return errs
}

func (o *Options) validateWebhooks() []error {
	var errs []error
	if err := validateWebhookNames(o.Webhooks); err != nil {
		errs = append(errs, err)
	}
	if o.WebhookSecurePort < 0 || o.WebhookSecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-secure-port %d must be between 0 (disabled) and 65535", o.WebhookSecurePort))
	}
	if !o.webhooksServed() {
		return errs
	}
	if o.WebhookSecurePort == o.SecurePort {
		errs = append(errs, fmt.Errorf("--webhook-secure-port %d is also --secure-port: give the webhooks a port of their own", o.WebhookSecurePort))
	}
	if net.ParseIP(o.WebhookBindAddress) == nil {
		errs = append(errs, fmt.Errorf("--webhook-bind-address %q is not an IP address", o.WebhookBindAddress))
	}
	if (o.WebhookTLSCertFile == "") != (o.WebhookTLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("--webhook-tls-cert-file and --webhook-tls-private-key-file must be given together"))
	}
	if o.WebhookTLSMinVersion != "" {
		if _, err := cliflag.TLSVersion(o.WebhookTLSMinVersion); err != nil {
			errs = append(errs, fmt.Errorf("--webhook-tls-min-version: %w", err))
		}
	}
	if len(o.WebhookTLSCipherSuites) > 0 {
		if _, err := cliflag.TLSCipherSuites(o.WebhookTLSCipherSuites); err != nil {
			errs = append(errs, fmt.Errorf("--webhook-tls-cipher-suites: %w", err))
		}
	}
	return errs
}

// clusterCIDRs parses --cluster-cidr (already validated); nil when unset.
func (o *Options) clusterCIDRs() ([]netip.Prefix, error) {
	if o.ClusterCIDR == "" {
		return nil, nil
	}
	return route.ParseClusterCIDRs(o.ClusterCIDR)
}

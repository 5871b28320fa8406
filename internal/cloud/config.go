package cloud

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/plugin"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Config is the composition part of the manager configuration file: which providers
// run and which of them serves nodes, load balancers and routes. Build validates it
// and opens the providers; docs/configuration.md is the user reference.
//
// With a single provider, empty DefaultNodeProvider, DefaultLoadBalancerProvider and
// RoutesProvider default to it (the upstream --cloud-provider style). With several,
// an empty one means "none": nodes without a provider ID, Services without a class,
// or routes are then left alone.
type Config struct {
	// Providers lists the providers to run.
	Providers []ProviderConfig `json:"providers"`
	// DefaultNodeProvider owns nodes that have no spec.providerID yet.
	DefaultNodeProvider string `json:"defaultNodeProvider,omitempty"`
	// DefaultLoadBalancerProvider serves LoadBalancer Services without
	// spec.loadBalancerClass.
	DefaultLoadBalancerProvider string `json:"defaultLoadBalancerProvider,omitempty"`
	// RoutesProvider programs pod-network routes.
	RoutesProvider string `json:"routesProvider,omitempty"`

	// fromFlags marks the configuration of FromFlags, whose errors name the
	// flags.
	fromFlags bool
}

// ProviderConfig configures one provider.
type ProviderConfig struct {
	// Name identifies the provider in this file, in logs and in metrics.
	Name string `json:"name"`
	// Type is the name the provider registered with
	// cloudprovider.RegisterCloudProvider (e.g. "minicloud").
	Type string `json:"type"`
	// CloudConfig is the provider's cloud-config, inline.
	CloudConfig string `json:"cloudConfig,omitempty"`
	// CloudConfigFile is the path of the provider's cloud-config file.
	CloudConfigFile string `json:"cloudConfigFile,omitempty"`
	// Plugin is where a provider of type "plugin" (an out-of-process
	// provider, docs/plugins.md) listens. It is the plugin's cloud-config;
	// set it instead of cloudConfig or cloudConfigFile.
	Plugin *plugin.Config `json:"plugin,omitempty"`
	// ProviderIDPrefix narrows which nodes the provider owns when several providers
	// share a provider-ID scheme: the node's spec.providerID must start with it
	// (and so it starts with "<scheme>://").
	ProviderIDPrefix string `json:"providerIDPrefix,omitempty"`
	// NodeSelector narrows which nodes the provider owns by node labels. It also
	// claims nodes without a provider ID that match it (before the default node
	// provider does).
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// LoadBalancerClasses are the spec.loadBalancerClass values this provider serves.
	LoadBalancerClasses []string `json:"loadBalancerClasses,omitempty"`
	// Budget limits the provider's cloud API calls.
	Budget BudgetConfig `json:"budget,omitempty"`
	// InstanceCacheFreshness is how long an instance listing answers instance
	// questions (providers that implement InstanceLister only). Default 30s.
	InstanceCacheFreshness *metav1.Duration `json:"instanceCacheFreshness,omitempty"`
}

// BudgetConfig is a provider's request budget, shared by all controllers.
type BudgetConfig struct {
	// Rate is the sustained number of cloud calls per second.
	Rate float64 `json:"rate,omitempty"`
	// Burst is the number of calls that may be made at once after a quiet period.
	Burst int `json:"burst,omitempty"`
	// MaxConcurrent caps the calls in flight.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// MaxRetries is how often a throttled or transient call is retried before its
	// error reaches the caller. -1 disables retries.
	MaxRetries int `json:"maxRetries,omitempty"`
}

// Budget and cache defaults, applied to zero fields.
const (
	// DefaultRate is the default sustained cloud calls per second per provider.
	DefaultRate = 10.0
	// DefaultBurst is the default token bucket size.
	DefaultBurst = 20
	// DefaultMaxConcurrent is the default cap on calls in flight per provider.
	DefaultMaxConcurrent = 8
	// DefaultMaxRetries is the default number of retries of a throttled or
	// transient call.
	DefaultMaxRetries = 3
	// DefaultInstanceCacheFreshness is how long an instance listing answers by
	// default.
	DefaultInstanceCacheFreshness = 30 * time.Second

	// defaultRetryBackoff is the first backoff after a transient error; it doubles
	// (with jitter) on each retry.
	defaultRetryBackoff = 500 * time.Millisecond
)

// fromProvider returns b with a zero rate (and burst) taken from the
// provider's own request limit (stratus.RequestLimiter), when it has one: a
// budget below it would waste the account's limit, one above it would queue
// calls in the provider instead of in the budget's priority order.
func (b BudgetConfig) fromProvider(raw cloudprovider.Interface) BudgetConfig {
	rl, ok := raw.(stratus.RequestLimiter)
	if !ok || b.Rate != 0 {
		return b
	}
	rate, burst := rl.RequestLimit()
	if rate <= 0 {
		return b
	}
	b.Rate = rate
	if b.Burst == 0 {
		b.Burst = max(burst, 1)
	}
	return b
}

// withDefaults returns b with zero fields set to the defaults.
func (b BudgetConfig) withDefaults() BudgetConfig {
	if b.Rate == 0 {
		b.Rate = DefaultRate
	}
	if b.Burst == 0 {
		b.Burst = max(DefaultBurst, int(b.Rate))
	}
	if b.MaxConcurrent == 0 {
		b.MaxConcurrent = DefaultMaxConcurrent
	}
	if b.MaxRetries == 0 {
		b.MaxRetries = DefaultMaxRetries
	}
	return b
}

// DefaultClusterName is --cluster-name's default, as upstream's: the name in
// the cloud resources (load balancers, routes) the controllers make, and the
// one every controller's Options default to.
const DefaultClusterName = "kubernetes"

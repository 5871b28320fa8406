package cloud

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Config is the composition part of the manager configuration file: which providers
// run and which of them serves nodes, load balancers and routes.
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
	// ProviderIDPrefix narrows which nodes the provider owns when several providers
	// share a provider-ID scheme: the node's spec.providerID must start with it.
	ProviderIDPrefix string `json:"providerIDPrefix,omitempty"`
	// NodeSelector narrows which nodes the provider owns by node labels.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// LoadBalancerClasses are the spec.loadBalancerClass values this provider serves.
	LoadBalancerClasses []string `json:"loadBalancerClasses,omitempty"`
	// Budget limits the provider's cloud API calls.
	Budget BudgetConfig `json:"budget,omitempty"`
}

// BudgetConfig is a provider's request budget, shared by all controllers.
type BudgetConfig struct {
	// Rate is the sustained number of cloud calls per second.
	Rate float64 `json:"rate,omitempty"`
	// Burst is the number of calls that may be made at once after a quiet period.
	Burst int `json:"burst,omitempty"`
	// MaxConcurrent caps the calls in flight.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
}

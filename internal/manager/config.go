package manager

import (
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/strictyaml"
)

// ManagerConfig API version and kind, as written in the --config file.
const (
	ConfigAPIVersion = "stratus.io/v1alpha1"
	ConfigKind       = "ManagerConfig"
)

// Config is the --config file (kind ManagerConfig): the provider composition (cloud.Config,
// inline) and settings that have no upstream flag.
//
//	apiVersion: stratus.io/v1alpha1
//	kind: ManagerConfig
//	providers:
//	- name: aws
//	  type: aws
//	  cloudConfigFile: /etc/stratus/aws.conf
//	defaultNodeProvider: aws
//	shutdownGracePeriod: 30s
type Config struct {
	metav1.TypeMeta `json:",inline"`
	// Config is the provider composition: providers, defaults, routesProvider.
	cloud.Config `json:",inline"`
	// ShutdownGracePeriod is how long in-flight work may take after SIGTERM before
	// it is cancelled (default 30s).
	ShutdownGracePeriod *metav1.Duration `json:"shutdownGracePeriod,omitempty"`
	// Service holds service controller settings without an upstream flag.
	Service ServiceSettings `json:"service,omitempty"`
	// Route holds route controller settings without an upstream flag.
	Route RouteSettings `json:"route,omitempty"`
	// NodeLifecycle holds the node lifecycle controller's deletion budget.
	NodeLifecycle NodeLifecycleSettings `json:"nodeLifecycle,omitempty"`
}

// NodeLifecycleSettings bound how many nodes the lifecycle controller may delete;
// unset fields take the controller's defaults (10% of a provider's nodes, at least
// 1, per 10 minutes).
type NodeLifecycleSettings struct {
	// DeletionBudgetPercent is the share of a provider's nodes that may be deleted
	// per window (1-100).
	DeletionBudgetPercent int `json:"deletionBudgetPercent,omitempty"`
	// DeletionBudgetMin is the number of deletions per window allowed however few
	// nodes the provider has.
	DeletionBudgetMin int `json:"deletionBudgetMin,omitempty"`
	// DeletionBudgetWindow is the sliding window of the budget.
	DeletionBudgetWindow *metav1.Duration `json:"deletionBudgetWindow,omitempty"`
}

// ServiceSettings are the service controller's stratus-only settings; unset
// fields take the controller's defaults.
type ServiceSettings struct {
	// NodeUpdateWindow gathers node changes before backends are updated.
	NodeUpdateWindow *metav1.Duration `json:"nodeUpdateWindow,omitempty"`
	// OrphanGracePeriod is how long a load balancer without its Service is kept.
	OrphanGracePeriod *metav1.Duration `json:"orphanGracePeriod,omitempty"`
}

// RouteSettings are the route controller's stratus-only settings; unset fields
// take the controller's defaults.
type RouteSettings struct {
	// ResyncPeriod is how often routes are fully reconciled without node changes.
	ResyncPeriod *metav1.Duration `json:"resyncPeriod,omitempty"`
	// MaxConcurrentOps caps route creations and deletions in flight.
	MaxConcurrentOps int `json:"maxConcurrentOps,omitempty"`
}

// DefaultShutdownGracePeriod bounds the shutdown after SIGTERM.
const DefaultShutdownGracePeriod = 30 * time.Second

// ErrConfig marks a --config file that cannot be used.
var ErrConfig = errors.New("invalid --config file")

// LoadConfig reads and validates the ManagerConfig at path. Unknown fields, a
// wrong apiVersion or kind, and invalid values are errors naming the file and the
// field.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrConfig, path, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrConfig, path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a ManagerConfig strictly (unknown and duplicate fields are
// errors) and validates it. Every error names the YAML path of the bad value
// (e.g. `route.resyncPeriod: invalid duration "1x": ...`).
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	if err := strictyaml.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// validate checks the stratus-only fields and the composition.
func (c *Config) validate() error {
	var errs []error
	if c.APIVersion != ConfigAPIVersion {
		errs = append(errs, fmt.Errorf("apiVersion: want %q, got %q", ConfigAPIVersion, c.APIVersion))
	}
	if c.Kind != ConfigKind {
		errs = append(errs, fmt.Errorf("kind: want %q, got %q", ConfigKind, c.Kind))
	}
	for _, d := range []struct {
		field string
		value *metav1.Duration
	}{
		{"shutdownGracePeriod", c.ShutdownGracePeriod},
		{"service.nodeUpdateWindow", c.Service.NodeUpdateWindow},
		{"service.orphanGracePeriod", c.Service.OrphanGracePeriod},
		{"route.resyncPeriod", c.Route.ResyncPeriod},
		{"nodeLifecycle.deletionBudgetWindow", c.NodeLifecycle.DeletionBudgetWindow},
	} {
		if d.value != nil && d.value.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.field, d.value.Duration))
		}
	}
	if p := c.NodeLifecycle.DeletionBudgetPercent; p < 0 || p > 100 {
		errs = append(errs, fmt.Errorf("nodeLifecycle.deletionBudgetPercent: must be between 0 and 100, got %d", p))
	}
	if c.NodeLifecycle.DeletionBudgetMin < 0 {
		errs = append(errs, fmt.Errorf("nodeLifecycle.deletionBudgetMin: must not be negative, got %d", c.NodeLifecycle.DeletionBudgetMin))
	}
	if c.Route.MaxConcurrentOps < 0 {
		errs = append(errs, fmt.Errorf("route.maxConcurrentOps: must not be negative, got %d", c.Route.MaxConcurrentOps))
	}
	// A file without providers only carries stratus settings for --cloud-provider.
	if len(c.Providers) > 0 {
		if err := c.Config.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

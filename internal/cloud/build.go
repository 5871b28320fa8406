package cloud

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/plugin"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate and Build that is
// the configuration's fault.
var ErrInvalidConfig = errors.New("invalid cloud configuration")

// fieldError is one problem with one field of the configuration.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }
func (e *fieldError) Unwrap() error { return ErrInvalidConfig }

func fieldErr(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

// providerNameRE limits provider names to what reads well in logs and metric labels.
var providerNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?$`)

// FromFlags returns the configuration of the upstream style of running one provider:
// --cloud-provider=NAME --cloud-config=FILE. The provider is named after its type
// and serves nodes, load balancers and routes.
// Errors about it name the flags, not a configuration-file path the user never
// wrote.
func FromFlags(cloudProvider, cloudConfigPath string) Config {
	return Config{Providers: []ProviderConfig{{
		Name:            cloudProvider,
		Type:            cloudProvider,
		CloudConfigFile: cloudConfigPath,
	}}, fromFlags: true}
}

// path names field (empty: the whole entry) of provider i as the user wrote it:
// its path in the configuration file, or, for a configuration from FromFlags,
// the flag it came from.
func (c Config) path(i int, field string) string {
	if c.fromFlags {
		p := c.Providers[i]
		switch {
		case field == "cloudConfigFile":
			return "--cloud-config " + p.CloudConfigFile
		case field == "" && p.CloudConfigFile != "":
			return fmt.Sprintf("--cloud-provider %s --cloud-config %s", p.Type, p.CloudConfigFile)
		}
		return "--cloud-provider " + p.Type
	}
	if field == "" {
		return fmt.Sprintf("providers[%d]", i)
	}
	return fmt.Sprintf("providers[%d].%s", i, field)
}

// withDefaults returns c with the single-provider defaults applied. A provider
// whose name is invalid gets none: its name error says it all.
func (c Config) withDefaults() Config {
	if len(c.Providers) == 1 && providerNameRE.MatchString(c.Providers[0].Name) {
		name := c.Providers[0].Name
		for _, f := range []*string{&c.DefaultNodeProvider, &c.DefaultLoadBalancerProvider, &c.RoutesProvider} {
			if *f == "" {
				*f = name
			}
		}
	}
	return c
}

// Validate checks the configuration without opening any provider and returns every
// problem found, each naming its field (e.g. `providers[1].type: provider "nope" is
// not registered`). The errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if len(c.Providers) == 0 {
		errs = append(errs, fieldErr("providers", "at least one provider is required"))
	}
	names := map[string]int{}
	classes := map[string]string{}
	for i, p := range c.Providers {
		path := fmt.Sprintf("providers[%d]", i)
		// From flags the name is the type, and a type error says it all.
		checkName := !c.fromFlags || cloudprovider.IsCloudProvider(p.Type)
		switch {
		case !checkName:
			names[p.Name] = i
		case p.Name == "":
			errs = append(errs, fieldErr(c.path(i, "name"), "required"))
		case !providerNameRE.MatchString(p.Name):
			errs = append(errs, fieldErr(c.path(i, "name"), "%q must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit", p.Name))
		default:
			if j, dup := names[p.Name]; dup {
				errs = append(errs, fieldErr(c.path(i, "name"), "%q is already the name of providers[%d]", p.Name, j))
			} else {
				names[p.Name] = i
			}
		}
		switch {
		case p.Type == "":
			errs = append(errs, fieldErr(c.path(i, "type"), "required"))
		case !cloudprovider.IsCloudProvider(p.Type):
			errs = append(errs, fieldErr(c.path(i, "type"), "provider %q is not registered (is its package imported into this build?)", p.Type))
		}
		if p.CloudConfig != "" && p.CloudConfigFile != "" {
			errs = append(errs, fieldErr(path+".cloudConfigFile", "set either cloudConfig or cloudConfigFile, not both"))
		}
		errs = append(errs, p.validatePlugin(path)...)
		if p.ProviderIDPrefix != "" && !strings.Contains(p.ProviderIDPrefix, "://") {
			errs = append(errs, fieldErr(path+".providerIDPrefix", "%q must start with the provider-ID scheme, e.g. \"minicloud://\"", p.ProviderIDPrefix))
		}
		if p.NodeSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(p.NodeSelector); err != nil {
				errs = append(errs, fieldErr(path+".nodeSelector", "%v", err))
			}
		}
		for j, class := range p.LoadBalancerClasses {
			cpath := fmt.Sprintf("%s.loadBalancerClasses[%d]", path, j)
			if class == "" {
				errs = append(errs, fieldErr(cpath, "must not be empty"))
				continue
			}
			if owner, dup := classes[class]; dup {
				errs = append(errs, fieldErr(cpath, "class %q is already mapped to provider %q", class, owner))
				continue
			}
			classes[class] = p.Name
		}
		errs = append(errs, p.Budget.validate(path+".budget")...)
		if p.InstanceCacheFreshness != nil && p.InstanceCacheFreshness.Duration < 0 {
			errs = append(errs, fieldErr(path+".instanceCacheFreshness", "must not be negative"))
		}
	}
	for _, ref := range []struct{ path, name string }{
		{"defaultNodeProvider", c.DefaultNodeProvider},
		{"defaultLoadBalancerProvider", c.DefaultLoadBalancerProvider},
		{"routesProvider", c.RoutesProvider},
	} {
		if _, ok := names[ref.name]; ref.name != "" && !ok {
			errs = append(errs, fieldErr(ref.path, "%q is not the name of a configured provider", ref.name))
		}
	}
	return errors.Join(errs...)
}

// validatePlugin checks the plugin block: required for type "plugin" (unless
// the plugin's configuration is its cloud-config), refused for other types.
func (p ProviderConfig) validatePlugin(path string) []error {
	switch {
	case p.Plugin == nil && p.Type == plugin.ProviderType && p.CloudConfig == "" && p.CloudConfigFile == "":
		return []error{fieldErr(path+".plugin", "required for type %q: the plugin's address", plugin.ProviderType)}
	case p.Plugin == nil:
		return nil
	case p.Type != plugin.ProviderType:
		return []error{fieldErr(path+".plugin", "only for type %q, not %q", plugin.ProviderType, p.Type)}
	case p.CloudConfig != "" || p.CloudConfigFile != "":
		return []error{fieldErr(path+".plugin", "set either plugin or cloudConfig/cloudConfigFile, not both")}
	}
	var errs []error
	for _, fe := range p.Plugin.Validate() {
		errs = append(errs, fieldErr(path+".plugin."+fe.Field, "%s", fe.Message))
	}
	return errs
}

func (b BudgetConfig) validate(path string) []error {
	var errs []error
	if b.Rate < 0 {
		errs = append(errs, fieldErr(path+".rate", "must not be negative"))
	}
	if b.Burst < 0 {
		errs = append(errs, fieldErr(path+".burst", "must not be negative"))
	}
	if b.MaxConcurrent < 0 {
		errs = append(errs, fieldErr(path+".maxConcurrent", "must not be negative"))
	}
	if b.MaxRetries < -1 {
		errs = append(errs, fieldErr(path+".maxRetries", "must be -1 (no retries) or more"))
	}
	return errs
}

// Build validates cfg, opens every provider through the upstream registry
// (cloudprovider.GetCloudProvider with its inline or file cloud-config, nil when it
// has none), wraps each with its budget and cache, and returns the composition.
// Providers of the same type are separate instances with separate budgets.
func Build(cfg Config) (*Set, error) {
	explicit := cfg
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Set{byName: map[string]*Provider{}, classes: map[string]*Provider{}}
	schemes := map[string][]int{}
	for i, pc := range cfg.Providers {
		p, err := open(cfg.path, i, pc)
		if err != nil {
			return nil, err
		}
		s.providers = append(s.providers, p)
		s.byName[pc.Name] = p
		if pc.ProviderIDPrefix != "" && !strings.HasPrefix(pc.ProviderIDPrefix, p.ProviderName()+"://") {
			return nil, fieldErr(fmt.Sprintf("providers[%d].providerIDPrefix", i), "%q does not start with the provider's scheme %q", pc.ProviderIDPrefix, p.ProviderName()+"://")
		}
		rule := nodeRule{provider: p, prefix: pc.ProviderIDPrefix}
		if pc.NodeSelector != nil {
			rule.selector, _ = metav1.LabelSelectorAsSelector(pc.NodeSelector) // validated above
		}
		s.nodeRules = append(s.nodeRules, rule)
		schemes[p.ProviderName()] = append(schemes[p.ProviderName()], i)
		for _, class := range pc.LoadBalancerClasses {
			s.classes[class] = p
		}
	}
	for scheme, idx := range schemes {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			if pc := cfg.Providers[i]; pc.ProviderIDPrefix == "" && pc.NodeSelector == nil {
				return nil, fieldErr(fmt.Sprintf("providers[%d]", i), "provider %q shares the provider-ID scheme %q with other providers; set providerIDPrefix or nodeSelector on each of them", pc.Name, scheme)
			}
		}
	}
	s.defaultNode = s.byName[cfg.DefaultNodeProvider]
	s.defaultLB = s.byName[cfg.DefaultLoadBalancerProvider]
	s.routes = s.byName[cfg.RoutesProvider]
	if err := checkCapabilities(explicit, s); err != nil {
		return nil, err
	}
	return s, nil
}

// checkCapabilities rejects work explicitly given to a provider that cannot do it.
// Defaults are not checked: a single provider without Routes simply programs no
// routes, as upstream.
func checkCapabilities(cfg Config, s *Set) error {
	var errs []error
	for i, pc := range cfg.Providers {
		if _, ok := s.byName[pc.Name].LoadBalancer(); len(pc.LoadBalancerClasses) > 0 && !ok {
			errs = append(errs, fieldErr(fmt.Sprintf("providers[%d].loadBalancerClasses", i), "provider %q does not support load balancers", pc.Name))
		}
	}
	if p := s.byName[cfg.DefaultLoadBalancerProvider]; p != nil {
		if _, ok := p.LoadBalancer(); !ok {
			errs = append(errs, fieldErr("defaultLoadBalancerProvider", "provider %q does not support load balancers", p.Name()))
		}
	}
	if p := s.byName[cfg.RoutesProvider]; p != nil {
		if _, ok := p.Routes(); !ok {
			errs = append(errs, fieldErr("routesProvider", "provider %q does not support routes", p.Name()))
		}
	}
	if p := s.byName[cfg.DefaultNodeProvider]; p != nil && !p.HasInstances() {
		errs = append(errs, fieldErr("defaultNodeProvider", "provider %q supports neither Instances nor InstancesV2", p.Name()))
	}
	return errors.Join(errs...)
}

// open initializes provider i, pc, through the upstream registry and wraps it;
// path names its fields in errors (Config.path).
func open(path func(i int, field string) string, i int, pc ProviderConfig) (*Provider, error) {
	var config io.Reader // an untyped nil when there is no cloud-config, as upstream
	switch {
	case pc.Plugin != nil:
		raw, err := json.Marshal(pc.Plugin)
		if err != nil {
			return nil, fieldErr(path(i, "plugin"), "%v", err)
		}
		config = bytes.NewReader(raw)
	case pc.CloudConfig != "":
		config = strings.NewReader(pc.CloudConfig)
	case pc.CloudConfigFile != "":
		f, err := os.Open(pc.CloudConfigFile)
		if err != nil {
			return nil, fieldErr(path(i, "cloudConfigFile"), "%v", err)
		}
		defer f.Close()
		config = f
	}
	raw, err := cloudprovider.GetCloudProvider(pc.Type, config)
	if err != nil {
		return nil, fmt.Errorf("%s: initialize provider %q of type %q: %w", path(i, ""), pc.Name, pc.Type, err)
	}
	if raw == nil {
		return nil, fieldErr(path(i, "type"), "provider %q is not registered", pc.Type)
	}
	opts := []Option{WithBudget(pc.Budget.fromProvider(raw))}
	if pc.InstanceCacheFreshness != nil {
		opts = append(opts, WithInstanceCacheFreshness(pc.InstanceCacheFreshness.Duration))
	}
	return NewProvider(pc.Name, raw, opts...), nil
}

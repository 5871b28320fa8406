package openstack

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/providers/internal/gitini"
)

// Config is the provider's configuration, read from upstream's cloud.conf
// (the INI file the OpenStack cloud controller manager reads), so that a
// cluster can switch providers with the same file.
type Config struct {
	// AuthURL is Keystone's URL ([Global] auth-url).
	AuthURL string
	// UserID or Username with UserDomainID/UserDomainName, and Password,
	// authenticate a user; ApplicationCredentialID (or
	// ApplicationCredentialName with the user) and
	// ApplicationCredentialSecret an application credential.
	UserID, Username, Password                                                      string
	UserDomainID, UserDomainName                                                    string
	ApplicationCredentialID, ApplicationCredentialName, ApplicationCredentialSecret string
	// ProjectID or ProjectName with ProjectDomainID/ProjectDomainName scope
	// the token ([Global] tenant-id / tenant-name, tenant-domain-*).
	ProjectID, ProjectName             string
	ProjectDomainID, ProjectDomainName string
	// DomainID and DomainName are the default domain of the user and project.
	DomainID, DomainName string
	// Region selects the catalog endpoints and is every node's region.
	Region string
	// EndpointType is the catalog interface: public (default), internal or admin.
	EndpointType string
	// CAFile is a PEM bundle that verifies the API certificates;
	// TLSInsecure skips verification.
	CAFile      string
	TLSInsecure bool
	// IPv6Disabled drops IPv6 node addresses ([Networking] ipv6-support-disabled).
	IPv6Disabled bool
	// PublicNetworks and InternalNetworks name the Nova networks whose fixed
	// addresses are ExternalIP and InternalIP ([Networking]
	// public-network-name / internal-network-name, repeatable).
	PublicNetworks, InternalNetworks []string
	// LBDisabled turns load balancers off ([LoadBalancer] enabled = false).
	LBDisabled bool
	// SubnetID is the VIP subnet and the members' subnet ([LoadBalancer]
	// subnet-id), required to create load balancers.
	SubnetID string
	// FloatingNetworkID, when set, gives every load balancer a floating IP
	// on this network, reported instead of the VIP.
	FloatingNetworkID string
	// LBProvider is the Octavia provider (driver); empty is Octavia's default.
	LBProvider string
	// CreateMonitor adds a health monitor to every pool: TCP (UDP-CONNECT
	// for UDP), HTTP on the health check node port for a Service with
	// externalTrafficPolicy Local, as upstream.
	CreateMonitor bool
	// MonitorDelay, MonitorTimeout, MonitorMaxRetries and
	// MonitorMaxRetriesDown tune those monitors ([LoadBalancer]
	// monitor-delay, monitor-timeout, monitor-max-retries,
	// monitor-max-retries-down; upstream's defaults 5s, 3s, 1, 3).
	MonitorDelay, MonitorTimeout             time.Duration
	MonitorMaxRetries, MonitorMaxRetriesDown int
	// LBMethod is every pool's lb_algorithm ([LoadBalancer] lb-method,
	// default ROUND_ROBIN).
	LBMethod string
	// CascadeDelete deletes a load balancer with its children in one call
	// ([LoadBalancer] cascade-delete, default true); false deletes the
	// listeners and pools first, one per call.
	CascadeDelete bool
	// RouterID is the Neutron router whose extra routes carry the pod
	// CIDRs ([Route] router-id); empty: routes are not managed.
	RouterID string
	// Classes are the [LoadBalancerClass "name"] sections by name; a
	// Service picks one with the loadbalancer.openstack.org/class annotation.
	Classes map[string]*LBClass
}

// LBClass is one [LoadBalancerClass "name"] section: what it sets replaces
// [LoadBalancer]'s value for the Services of that class.
type LBClass struct {
	// SubnetID is the VIP and members' subnet (subnet-id).
	SubnetID string
	// FloatingNetworkID is the floating IPs' network (floating-network-id).
	FloatingNetworkID string
}

// classKeys are the keys of a [LoadBalancerClass "name"] section; nil set:
// recognized (upstream reads it), not supported.
var classKeys = map[string]func(*LBClass, string){
	"subnet-id":            func(c *LBClass, v string) { c.SubnetID = v },
	"floating-network-id":  func(c *LBClass, v string) { c.FloatingNetworkID = v },
	"floating-subnet-id":   nil,
	"floating-subnet":      nil,
	"floating-subnet-tags": nil,
	"network-id":           nil,
	"member-subnet-id":     nil,
}

// defaults are upstream's defaults of the keys that have one.
func defaults() *Config {
	return &Config{MonitorDelay: 5 * time.Second, MonitorTimeout: 3 * time.Second, MonitorMaxRetries: 1, MonitorMaxRetriesDown: 3,
		LBMethod: "ROUND_ROBIN", CascadeDelete: true}
}

// lbMethods are the lb-method values upstream passes to Octavia.
var lbMethods = []string{"ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT"}

// key is one configuration key: its section, its name, where it is stored
// (nil when the key is recognized but not supported) and why not.
type key struct {
	section, name string
	set           func(c *Config, value, where string) error
	unsupported   string
}

func str(f func(*Config) *string) func(*Config, string, string) error {
	return func(c *Config, v, _ string) error { *f(c) = v; return nil }
}

func list(f func(*Config) *[]string) func(*Config, string, string) error {
	return func(c *Config, v, _ string) error { *f(c) = append(*f(c), v); return nil }
}

func boolean(f func(*Config) *bool) func(*Config, string, string) error {
	return func(c *Config, v, where string) error {
		b, err := gitini.Bool(where, v)
		*f(c) = b
		return err
	}
}

func duration(f func(*Config) *time.Duration) func(*Config, string, string) error {
	return func(c *Config, v, where string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s: %q is not a positive duration (e.g. 5s)", where, v)
		}
		*f(c) = d
		return nil
	}
}

func count(min int, f func(*Config) *int) func(*Config, string, string) error {
	return func(c *Config, v, where string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("%s: %q is not a whole number of at least %d", where, v, min)
		}
		*f(c) = n
		return nil
	}
}

const noLB = "not supported by this provider's load balancers"

// keys lists every key upstream reads from cloud.conf (and the project-*
// spellings of the tenant-* keys), supported or not.
var keys = []key{
	{section: "global", name: "auth-url", set: str(func(c *Config) *string { return &c.AuthURL })},
	{section: "global", name: "user-id", set: str(func(c *Config) *string { return &c.UserID })},
	{section: "global", name: "username", set: str(func(c *Config) *string { return &c.Username })},
	{section: "global", name: "password", set: str(func(c *Config) *string { return &c.Password })},
	{section: "global", name: "tenant-id", set: str(func(c *Config) *string { return &c.ProjectID })},
	{section: "global", name: "project-id", set: str(func(c *Config) *string { return &c.ProjectID })},
	{section: "global", name: "tenant-name", set: str(func(c *Config) *string { return &c.ProjectName })},
	{section: "global", name: "project-name", set: str(func(c *Config) *string { return &c.ProjectName })},
	{section: "global", name: "tenant-domain-id", set: str(func(c *Config) *string { return &c.ProjectDomainID })},
	{section: "global", name: "project-domain-id", set: str(func(c *Config) *string { return &c.ProjectDomainID })},
	{section: "global", name: "tenant-domain-name", set: str(func(c *Config) *string { return &c.ProjectDomainName })},
	{section: "global", name: "project-domain-name", set: str(func(c *Config) *string { return &c.ProjectDomainName })},
	{section: "global", name: "domain-id", set: str(func(c *Config) *string { return &c.DomainID })},
	{section: "global", name: "domain-name", set: str(func(c *Config) *string { return &c.DomainName })},
	{section: "global", name: "user-domain-id", set: str(func(c *Config) *string { return &c.UserDomainID })},
	{section: "global", name: "user-domain-name", set: str(func(c *Config) *string { return &c.UserDomainName })},
	{section: "global", name: "region", set: str(func(c *Config) *string { return &c.Region })},
	{section: "global", name: "os-endpoint-type", set: str(func(c *Config) *string { return &c.EndpointType })},
	{section: "global", name: "ca-file", set: str(func(c *Config) *string { return &c.CAFile })},
	{section: "global", name: "tls-insecure", set: boolean(func(c *Config) *bool { return &c.TLSInsecure })},
	{section: "global", name: "application-credential-id", set: str(func(c *Config) *string { return &c.ApplicationCredentialID })},
	{section: "global", name: "application-credential-name", set: str(func(c *Config) *string { return &c.ApplicationCredentialName })},
	{section: "global", name: "application-credential-secret", set: str(func(c *Config) *string { return &c.ApplicationCredentialSecret })},
	{section: "global", name: "trust-id", unsupported: "not supported: trusts (use a password or an application credential)"},
	{section: "global", name: "trustee-id", unsupported: "not supported: trusts (use a password or an application credential)"},
	{section: "global", name: "trustee-password", unsupported: "not supported: trusts (use a password or an application credential)"},
	{section: "global", name: "token", unsupported: "not supported: a fixed token expires (use a password or an application credential)"},
	{section: "global", name: "cert-file", unsupported: "not supported: TLS client certificates"},
	{section: "global", name: "key-file", unsupported: "not supported: TLS client certificates"},
	{section: "global", name: "use-clouds", unsupported: "not supported: clouds.yaml (put the credentials in [Global])"},
	{section: "global", name: "clouds-file", unsupported: "not supported: clouds.yaml (put the credentials in [Global])"},
	{section: "global", name: "cloud", unsupported: "not supported: clouds.yaml (put the credentials in [Global])"},
	{section: "networking", name: "ipv6-support-disabled", set: boolean(func(c *Config) *bool { return &c.IPv6Disabled })},
	{section: "networking", name: "public-network-name", set: list(func(c *Config) *[]string { return &c.PublicNetworks })},
	{section: "networking", name: "internal-network-name", set: list(func(c *Config) *[]string { return &c.InternalNetworks })},
	{section: "networking", name: "address-sort-order", unsupported: "not supported: addresses keep Nova's order"},
	{section: "loadbalancer", name: "enabled", set: func(c *Config, v, where string) error {
		on, err := gitini.Bool(where, v)
		c.LBDisabled = !on
		return err
	}},
	{section: "loadbalancer", name: "subnet-id", set: str(func(c *Config) *string { return &c.SubnetID })},
	{section: "loadbalancer", name: "floating-network-id", set: str(func(c *Config) *string { return &c.FloatingNetworkID })},
	{section: "loadbalancer", name: "lb-provider", set: str(func(c *Config) *string { return &c.LBProvider })},
	{section: "loadbalancer", name: "create-monitor", set: boolean(func(c *Config) *bool { return &c.CreateMonitor })},
	{section: "loadbalancer", name: "monitor-delay", set: duration(func(c *Config) *time.Duration { return &c.MonitorDelay })},
	{section: "loadbalancer", name: "monitor-timeout", set: duration(func(c *Config) *time.Duration { return &c.MonitorTimeout })},
	{section: "loadbalancer", name: "monitor-max-retries", set: count(1, func(c *Config) *int { return &c.MonitorMaxRetries })},
	{section: "loadbalancer", name: "monitor-max-retries-down", set: count(1, func(c *Config) *int { return &c.MonitorMaxRetriesDown })},
	{section: "loadbalancer", name: "lb-method", set: func(c *Config, v, where string) error {
		m := strings.ToUpper(v)
		if !slices.Contains(lbMethods, m) {
			return fmt.Errorf("%s: %q: want one of %s", where, v, strings.Join(lbMethods, ", "))
		}
		c.LBMethod = m
		return nil
	}},
	{section: "loadbalancer", name: "cascade-delete", set: boolean(func(c *Config) *bool { return &c.CascadeDelete })},
	{section: "route", name: "router-id", set: str(func(c *Config) *string { return &c.RouterID })},
	{section: "metadata", name: "search-order", set: func(*Config, string, string) error { return nil }},
	{section: "metadata", name: "request-timeout", unsupported: "not supported: the provider never reads the metadata service"},
}

// lbKeys are upstream's [LoadBalancer] keys: recognized, not supported.
var lbKeys = []string{"lb-version", "member-subnet-id", "network-id",
	"floating-subnet-id", "floating-subnet", "floating-subnet-tags", "manage-security-groups",
	"internal-lb", "node-selector", "flavor-id", "availability-zone", "enable-ingress-hostname",
	"ingress-hostname-suffix", "max-shared-lb", "container-store", "provider-requires-serial-api-calls",
	"default-tls-container-ref"}

func init() {
	for _, k := range lbKeys {
		keys = append(keys, key{section: "loadbalancer", name: k, unsupported: noLB})
	}
}

// sectionNames are the sections as written in errors and docs.
var sectionNames = map[string]string{"global": "Global", "networking": "Networking", "loadbalancer": "LoadBalancer", "route": "Route", "metadata": "Metadata"}

// ParseConfig reads a cloud.conf. Every unknown section or key is an error
// naming it, and so is every upstream key this provider does not support.
func ParseConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, fmt.Errorf("openstack config: no cloud.conf given (--cloud-config)")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("openstack config: %w", err)
	}
	c := defaults()
	section := ""
	var class *LBClass // the [LoadBalancerClass] being read
	for n, line := range strings.Split(string(data), "\n") {
		lineNo := n + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			name, sub, hasSub, err := gitini.Header(line)
			if err != nil {
				return nil, fmt.Errorf("openstack config: line %d: %w", lineNo, err)
			}
			section = strings.ToLower(name)
			switch {
			case section == "loadbalancerclass":
				sub = strings.TrimSpace(sub)
				if !hasSub || sub == "" {
					return nil, fmt.Errorf("openstack config: line %d: %s: [LoadBalancerClass] needs a name: [LoadBalancerClass \"name\"]", lineNo, line)
				}
				if c.Classes[sub] != nil {
					return nil, fmt.Errorf("openstack config: line %d: %s: class %q is defined twice", lineNo, line, sub)
				}
				if c.Classes == nil {
					c.Classes = map[string]*LBClass{}
				}
				class = &LBClass{}
				c.Classes[sub] = class
				continue
			case sectionNames[section] == "":
				return nil, fmt.Errorf("openstack config: line %d: %s: unknown section (known: [Global], [Networking], [LoadBalancer], [Route], [Metadata])", lineNo, line)
			case hasSub:
				return nil, fmt.Errorf("openstack config: line %d: %s: [%s] takes no subsection", lineNo, line, sectionNames[section])
			}
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("openstack config: line %d: a key before the first section header", lineNo)
		}
		name, value, err := gitini.Variable(line)
		if err != nil {
			return nil, fmt.Errorf("openstack config: line %d: [%s] %w", lineNo, sectionNames[section], err)
		}
		if section == "loadbalancerclass" {
			set, known := classKeys[name]
			switch {
			case !known:
				return nil, fmt.Errorf("openstack config: line %d: [LoadBalancerClass] %s: unknown key", lineNo, name)
			case set == nil:
				return nil, fmt.Errorf("openstack config: line %d: [LoadBalancerClass] %s: %s", lineNo, name, noLB)
			}
			set(class, value)
			continue
		}
		where := fmt.Sprintf("[%s] %s", sectionNames[section], name)
		i := slices.IndexFunc(keys, func(k key) bool { return k.section == section && k.name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("openstack config: line %d: %s: unknown key", lineNo, where)
		case keys[i].set == nil:
			return nil, fmt.Errorf("openstack config: line %d: %s: %s", lineNo, where, keys[i].unsupported)
		}
		if err := keys[i].set(c, value, where); err != nil {
			return nil, fmt.Errorf("openstack config: line %d: %w", lineNo, err)
		}
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("openstack config: %w", err)
	}
	return c, nil
}

func (c *Config) validate() error {
	switch {
	case c.AuthURL == "":
		return fmt.Errorf("[Global] auth-url is required")
	case c.ApplicationCredentialSecret != "":
		if c.ApplicationCredentialID == "" && c.ApplicationCredentialName == "" {
			return fmt.Errorf("[Global] application-credential-secret needs application-credential-id or application-credential-name")
		}
		if c.ApplicationCredentialID == "" && c.UserID == "" && c.Username == "" {
			return fmt.Errorf("[Global] application-credential-name needs user-id or username")
		}
	case c.ApplicationCredentialID != "" || c.ApplicationCredentialName != "":
		return fmt.Errorf("[Global] application-credential-secret is required with an application credential")
	case c.Password == "":
		return fmt.Errorf("[Global] password (or application-credential-id and application-credential-secret) is required")
	case c.UserID == "" && c.Username == "":
		return fmt.Errorf("[Global] username or user-id is required with password")
	}
	switch c.EndpointType {
	case "", "public", "internal", "admin":
	default:
		return fmt.Errorf("[Global] os-endpoint-type %q: want public, internal or admin", c.EndpointType)
	}
	return nil
}

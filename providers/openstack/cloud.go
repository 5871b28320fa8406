package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// ProviderName is the name the provider registers under (--cloud-provider)
// and the scheme of its provider IDs, as upstream's.
const ProviderName = "openstack"

// novaMicroversion is the compute API version the provider asks for: from
// 2.47 a server embeds its flavor (original_name), so the instance type
// needs no flavor call per server.
const novaMicroversion = "2.47"

// requestTimeout bounds one HTTP request to the cloud.
const requestTimeout = 60 * time.Second

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		cfg, err := ParseConfig(r)
		if err != nil {
			return nil, err
		}
		return New(cfg)
	})
}

// Cloud is the OpenStack provider: InstancesV2 over Nova servers and
// LoadBalancer over Octavia, plus stratus's InstanceLister and
// LoadBalancerLister.
type Cloud struct {
	cfg  *Config
	http *http.Client

	// mu guards the authenticated provider client and the service
	// clients, made by the first call that needs them (authentication
	// needs the cloud, the provider's factory does not). gophercloud
	// re-authenticates on 401 by itself.
	mu                   sync.Mutex
	pc                   *gophercloud.ProviderClient
	compute, network, lb *gophercloud.ServiceClient
	lbs                  *loadBalancers
	routes               *routes
}

// New returns the provider for cfg. It reads the CA file but contacts
// nothing: the first call authenticates.
func New(cfg *Config) (*Cloud, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	if cfg.CAFile != "" || cfg.TLSInsecure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.TLSInsecure} //nolint:gosec // the operator asked for tls-insecure
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("openstack config: [Global] ca-file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("openstack config: [Global] ca-file %s: no PEM certificate in it", cfg.CAFile)
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	c := &Cloud{cfg: cfg, http: &http.Client{Timeout: requestTimeout, Transport: tr}}
	c.lbs = &loadBalancers{c: c, cfg: c.cfg}
	c.routes = &routes{c: c}
	return c, nil
}

// authOptions maps the configuration to gophercloud's, as upstream does:
// the user's and the project's domains default to domain-id/domain-name.
func (c *Config) authOptions() gophercloud.AuthOptions {
	ao := gophercloud.AuthOptions{
		IdentityEndpoint:            c.AuthURL,
		UserID:                      c.UserID,
		Username:                    c.Username,
		Password:                    c.Password,
		DomainID:                    firstOf(c.UserDomainID, c.DomainID),
		DomainName:                  firstOf(c.UserDomainName, c.DomainName),
		ApplicationCredentialID:     c.ApplicationCredentialID,
		ApplicationCredentialName:   c.ApplicationCredentialName,
		ApplicationCredentialSecret: c.ApplicationCredentialSecret,
		AllowReauth:                 true,
	}
	if ao.DomainID != "" {
		ao.DomainName = ""
	}
	if c.ProjectID != "" || c.ProjectName != "" {
		s := &gophercloud.AuthScope{ProjectID: c.ProjectID}
		if c.ProjectID == "" {
			s.ProjectName = c.ProjectName
			s.DomainID = firstOf(c.ProjectDomainID, c.DomainID)
			if s.DomainID == "" {
				s.DomainName = firstOf(c.ProjectDomainName, c.DomainName)
			}
		}
		ao.Scope = s
	}
	if ao.ApplicationCredentialID != "" {
		// An application credential carries its own user and scope.
		ao.UserID, ao.Username, ao.DomainID, ao.DomainName, ao.Scope = "", "", "", "", nil
	}
	return ao
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// client returns the service client made by mk (cached in *slot),
// authenticating first if needed.
func (c *Cloud) client(ctx context.Context, slot **gophercloud.ServiceClient, what string, mk func(*gophercloud.ProviderClient, gophercloud.EndpointOpts) (*gophercloud.ServiceClient, error)) (*gophercloud.ServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *slot != nil {
		return *slot, nil
	}
	if c.pc == nil {
		pc, err := gos.NewClient(c.cfg.AuthURL)
		if err != nil {
			return nil, fmt.Errorf("openstack: [Global] auth-url %q: %w", c.cfg.AuthURL, err)
		}
		pc.HTTPClient = *c.http
		pc.UserAgent.Prepend("stratus-openstack-provider")
		if err := gos.Authenticate(ctx, pc, c.cfg.authOptions()); err != nil {
			return nil, classify(fmt.Sprintf("authenticate to %s", c.cfg.AuthURL), err)
		}
		c.pc = pc
	}
	eo := gophercloud.EndpointOpts{Region: c.cfg.Region, Availability: gophercloud.Availability(c.cfg.EndpointType)}
	if eo.Availability == "" {
		eo.Availability = gophercloud.AvailabilityPublic
	}
	sc, err := mk(c.pc, eo)
	if err != nil {
		return nil, fmt.Errorf("openstack: %s endpoint in region %q: %w", what, c.cfg.Region, err)
	}
	*slot = sc
	return sc, nil
}

// computeClient returns the Nova client, at novaMicroversion.
func (c *Cloud) computeClient(ctx context.Context) (*gophercloud.ServiceClient, error) {
	return c.client(ctx, &c.compute, "compute", func(pc *gophercloud.ProviderClient, eo gophercloud.EndpointOpts) (*gophercloud.ServiceClient, error) {
		sc, err := gos.NewComputeV2(pc, eo)
		if sc != nil {
			sc.Microversion = novaMicroversion
		}
		return sc, err
	})
}

// networkClient returns the Neutron client.
func (c *Cloud) networkClient(ctx context.Context) (*gophercloud.ServiceClient, error) {
	return c.client(ctx, &c.network, "network", gos.NewNetworkV2)
}

// lbClient returns the Octavia client.
func (c *Cloud) lbClient(ctx context.Context) (*gophercloud.ServiceClient, error) {
	return c.client(ctx, &c.lb, "load-balancer", gos.NewLoadBalancerV2)
}

// LoadBalancer returns the Octavia load balancers, unless [LoadBalancer]
// enabled = false.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if c.cfg.LBDisabled {
		return nil, false
	}
	return c.lbs, true
}

// ListLoadBalancers implements stratus.LoadBalancerLister.
func (c *Cloud) ListLoadBalancers(ctx context.Context, clusterName string) ([]stratus.LoadBalancerRef, error) {
	if c.cfg.LBDisabled {
		return nil, nil
	}
	return c.lbs.ListLoadBalancers(ctx, clusterName)
}

// Instances returns false: the provider implements InstancesV2.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 returns the instances implementation.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// Zones returns false: InstancesV2 reports zones, as upstream.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters returns false.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes returns the extra routes of [Route] router-id; false without it.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if c.cfg.RouterID == "" {
		return nil, false
	}
	return c.routes, true
}

// ProviderName returns "openstack".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID returns true, as upstream.
func (c *Cloud) HasClusterID() bool { return true }

// Initialize keeps a Kubernetes client so that the route listing names
// next hops by the nodes' addresses, as upstream does. It starts nothing.
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, _ <-chan struct{}) {
	if b == nil || c.cfg.RouterID == "" {
		return
	}
	kc, err := b.Client("openstack-provider")
	if err != nil {
		klog.ErrorS(err, "openstack: no Kubernetes client; routes name next hops by the servers' names")
		return
	}
	c.routes.nodes.Store(&kc)
}

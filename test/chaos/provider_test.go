package chaos

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// provider is what a chaos run varies by the managers' cloud provider:
// the provider block of their --config, how the audit finds a Service's
// load balancer and the routes, what the cloud front empties, the fault
// kinds the provider adds to minicloud's, and the secrets and logs it adds.
// Machines are minicloud instances in every run (the OpenStack dialect's
// servers are minicloud instances, a plugin serves the minicloud provider).
type provider struct {
	name string
	// short is the size of the run under `go test` (make test).
	short size
	// setup starts what the provider needs and returns, for each replica,
	// the `providers:` list of its --config: replica i+1 reaches minicloud
	// at its own front address, c.front.urls[i] (see perReplica).
	setup func(t *testing.T, c *chaosCloud) []string
	// providerID is the provider ID of a Node on instance id.
	providerID func(id string) string
	// listing is how the provider lists every instance.
	listing listingRule
	// loadBalancers lists the cluster's load balancers as the audit checks
	// them.
	loadBalancers func(ctx context.Context, c *chaosCloud) ([]serviceLB, error)
	// routes lists the cluster's routes.
	routes func(ctx context.Context, c *chaosCloud) ([]api.Route, error)
	// faults are fault kinds beyond minicloud's, applied at their step; the
	// minicloud faults each returns are set for the step.
	faults []providerFault
	// secrets and logs add the provider's credentials and processes' logs to
	// those the run searches and saves.
	secrets func(c *chaosCloud) map[string]string
	logs    func() map[string]string
}

// providerFault is a fault kind of one provider.
type providerFault struct {
	kind  string
	apply func(ctx context.Context, f *faultDriver) api.Faults
}

// listingRule says which cloud requests list every instance, the operation
// name minicloud faults them under, and the body of an empty answer.
type listingRule struct {
	op      string
	matches func(*http.Request) bool
	empty   []byte
}

// serviceLB is a load balancer as the audit checks it: the minicloud load
// balancer that carries the traffic, the Service it was made for (by its
// tags or name), and the address its Service must show as ingress.
type serviceLB struct {
	uid, namespace, name string
	ingress              string
	lb                   api.LoadBalancer
}

// chaosCloud is what the run set up for the provider: the minicloud child
// process, the test's own client of it, the front the managers reach it
// through, and the run's directory, token and namespace (the cluster name).
type chaosCloud struct {
	dir, token, tokenFile string
	ns                    string
	replicas              int
	kubeconfig            string // the test's own kubeconfig (for plugins)
	kube                  kubernetes.Interface
	cloud                 *cloudProcess
	cl                    *client.Client
	front                 *cloudFront
}

// minicloudListing is the native API's instance listing: an unfiltered
// GET /v1/instances.
var minicloudListing = listingRule{
	op: "GET /v1/instances",
	matches: func(req *http.Request) bool {
		return req.Method == http.MethodGet && req.URL.Path == "/v1/instances" && !req.URL.Query().Has("name")
	},
	empty: []byte(`{"items":[]}`),
}

// perReplica is setup's result: block(i) for each replica i (0-based).
func perReplica(c *chaosCloud, block func(i int) string) []string {
	out := make([]string, c.replicas)
	for i := range out {
		out[i] = block(i)
	}
	return out
}

// minicloudConfigFile writes replica i's cloud-config of the minicloud
// provider, pointed at the replica's front address, with the extra lines
// given.
func minicloudConfigFile(t *testing.T, c *chaosCloud, i int, extra string) string {
	t.Helper()
	return writeFile(t, c.dir, fmt.Sprintf("minicloud-%d.yaml", i+1), "url: "+c.front.urls[i]+"\ntokenFile: "+c.tokenFile+"\n"+extra)
}

// minicloudProvider is stratus's minicloud provider in process.
func minicloudProvider() *provider {
	return &provider{
		name:  "minicloud",
		short: short,
		setup: func(t *testing.T, c *chaosCloud) []string {
			return perReplica(c, func(i int) string {
				return `- name: minicloud
  type: minicloud
  cloudConfigFile: ` + minicloudConfigFile(t, c, i, "") + `
  instanceCacheFreshness: 5s
`
			})
		},
		providerID:    mcprovider.ProviderID,
		listing:       minicloudListing,
		loadBalancers: minicloudLoadBalancers,
		routes:        minicloudRoutes,
	}
}

// minicloudLoadBalancers lists the load balancers the minicloud provider
// made for the cluster, by their tags.
func minicloudLoadBalancers(ctx context.Context, c *chaosCloud) ([]serviceLB, error) {
	lbs, err := c.cl.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: c.ns}})
	if err != nil {
		return nil, err
	}
	out := make([]serviceLB, 0, len(lbs))
	for _, lb := range lbs {
		out = append(out, serviceLB{uid: lb.Tags[mcprovider.TagServiceUID], namespace: lb.Tags[mcprovider.TagServiceNamespace],
			name: lb.Tags[mcprovider.TagServiceName], ingress: lb.VIP, lb: lb})
	}
	return out, nil
}

// minicloudRoutes lists the routes the minicloud provider made for the
// cluster, by their tags.
func minicloudRoutes(ctx context.Context, c *chaosCloud) ([]api.Route, error) {
	return c.cl.ListRoutes(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: c.ns}})
}

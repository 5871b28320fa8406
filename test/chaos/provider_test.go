package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/minicloud"
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
	// block is the second octet of the run's loopback addresses (0: 251).
	block int
	// cloudArgs are added to minicloud's command line.
	cloudArgs []string
	// setup starts what the provider needs and returns, for each replica,
	// the `providers:` list of its --config: replica i+1 reaches minicloud
	// at its own front address, c.front.urls[i] (see perReplica).
	setup func(t *testing.T, c *chaosCloud) []string
	// machines makes, deletes, stops and starts the machines the churn's
	// nodes run on.
	machines func(c *chaosCloud) machineOps
	// providerID is the provider ID of a Node on instance id.
	providerID func(id string) string
	// listing is how the provider lists every instance.
	listing listingRule
	// loadBalancers lists the cluster's load balancers as the audit checks
	// them.
	loadBalancers func(ctx context.Context, c *chaosCloud) ([]serviceLB, error)
	// noHealthCheck: the provider's load balancers have no health check to
	// audit.
	noHealthCheck bool
	// routes lists the cluster's routes (nil: the provider has none, the
	// managers run no route controller).
	routes func(ctx context.Context, c *chaosCloud) ([]api.Route, error)
	// cloudFaults are the kinds of minicloud's faults the run applies (nil:
	// all of faultKinds).
	cloudFaults []string
	// resetFaults ends the provider's faults (nil: it has none to end).
	resetFaults func()
	// faults are fault kinds beyond minicloud's, applied at their step; the
	// minicloud faults each returns are set for the step.
	faults []providerFault
	// secrets and logs add the provider's credentials and processes' logs to
	// those the run searches and saves.
	secrets func(c *chaosCloud) map[string]string
	logs    func() map[string]string
	// report adds rows to the report, given every process's log.
	report func(logs map[string]string) []reportRow
}

// machineOps is how a run drives its machines. Each call is retried by
// the churn while retryable says its error is transient.
type machineOps interface {
	create(ctx context.Context, name string, seq int) (machineInfo, error)
	delete(ctx context.Context, m *machine) error
	stop(ctx context.Context, m *machine) error
	start(ctx context.Context, m *machine) error
	retryable(err error) bool
	// exists says whether the machine of id exists; list gives the IDs of
	// every machine.
	exists(ctx context.Context, id string) (bool, error)
	list(ctx context.Context) (map[string]bool, error)
	// target is how a load balancer names m among its targets.
	target(m machine) string
}

// machineInfo is what a new machine is.
type machineInfo struct {
	id, ip, listenIP, systemUUID string
}

// minicloudMachines are minicloud instances.
type minicloudMachines struct{ cl *client.Client }

func (o minicloudMachines) create(ctx context.Context, name string, seq int) (machineInfo, error) {
	inst, err := o.cl.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: minicloud.Zones[seq%len(minicloud.Zones)]},
		client.WithIdempotencyKey(name))
	if err != nil {
		return machineInfo{}, err
	}
	return machineInfo{id: inst.ID, ip: inst.PrivateIP}, nil
}

func (o minicloudMachines) delete(ctx context.Context, m *machine) error {
	err := o.cl.DeleteInstance(ctx, m.id)
	if client.IsNotFound(err) {
		return nil // a retry after the cloud applied it
	}
	return err
}

func (o minicloudMachines) stop(ctx context.Context, m *machine) error {
	_, err := o.cl.StopInstance(ctx, m.id)
	return err
}

func (o minicloudMachines) start(ctx context.Context, m *machine) error {
	_, err := o.cl.StartInstance(ctx, m.id)
	return err
}

// retryable: what the client says, and a 401 too: the test's token is
// valid, only an injected fault (Keystone rejecting every token) refuses
// it.
func (o minicloudMachines) retryable(err error) bool {
	return client.IsRetryable(err) || client.IsUnauthorized(err)
}

func (o minicloudMachines) exists(ctx context.Context, id string) (bool, error) {
	_, err := o.cl.GetInstance(ctx, id)
	if client.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (o minicloudMachines) list(ctx context.Context) (map[string]bool, error) {
	insts, err := o.cl.ListInstances(ctx, client.ListOptions{})
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(insts))
	for _, in := range insts {
		ids[in.ID] = true
	}
	return ids, nil
}

func (o minicloudMachines) target(m machine) string { return m.id }

// onMinicloud is the machines of every provider whose nodes are minicloud
// instances.
func onMinicloud(c *chaosCloud) machineOps { return minicloudMachines{cl: c.cl} }

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

// cleanUp deletes what the run leaves in the package's control plane once
// its managers and kubelets have stopped: its machines' Nodes, and its
// Services, whose load-balancer finalizers no manager will remove now.
// Otherwise the next run's managers would find them (as Nodes to serve
// and Services to give load balancers in their own cloud).
func (w *world) cleanUp() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w.mu.Lock()
	names := slices.Collect(maps.Keys(w.machines))
	w.mu.Unlock()
	for _, name := range names {
		if err := w.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			w.t.Errorf("delete node %s after the run: %v", name, err)
		}
	}
	svcs, err := w.cs.CoreV1().Services(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Errorf("list services after the run: %v", err)
		return
	}
	for _, svc := range svcs.Items {
		if len(svc.Finalizers) > 0 {
			_, err := w.cs.CoreV1().Services(w.ns).Patch(ctx, svc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				w.t.Errorf("remove the finalizers of service %s/%s after the run: %v", w.ns, svc.Name, err)
			}
		}
		if err := w.cs.CoreV1().Services(w.ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			w.t.Errorf("delete service %s/%s after the run: %v", w.ns, svc.Name, err)
		}
	}
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
		machines:      onMinicloud,
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

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
)

// openstackCloud marks the scenarios run against minicloud's OpenStack
// dialect (Keystone, Nova, Neutron, Octavia on the same minicloud): the
// upstream side is hack/kubebins' openstack-ccm (the upstream OpenStack
// CCM, unchanged), the stratus side stratus-ccm with its native openstack
// provider, both with the same cloud.conf.
const openstackCloud = "openstack"

// startOpenStack runs a minicloud serving the OpenStack dialect, with
// o.Cloud's limits and Octavia delays, and writes the cloud.conf both
// managers read: the manager's token as the password, load balancers on the
// VIP subnet with a floating IP each. The dialect counts every request under
// its method and route ("GET /compute/v2.1/servers/{id}") for the
// manager's token, as minicloud counts its own API.
func startOpenStack(ctx context.Context, dir string, o Options) (*env, []string, func(), error) {
	e, stop, err := startMinicloudEnv(ctx, filepath.Join(dir, "minicloud"), o.Cloud, &mos.Options{PendingDelay: o.Cloud.OpenStackPendingDelay})
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*env, []string, func(), error) { stop(); return nil, nil, nil, err }
	identity := devenv.OpenStackIdentityURL(e.cloudURL)
	// Looked up with the harness's token: the manager's calls start at zero.
	topo, err := devenv.LookupOpenStack(ctx, identity, e.harnessToken)
	if err != nil {
		return fail(err)
	}
	topo.RouterID = "" // the benchmarks run without routes
	cloudConfig := filepath.Join(dir, "cloud.conf")
	if err := os.WriteFile(cloudConfig, devenv.OpenStackCloudConf(identity, "ccm", e.managerToken, topo), 0o600); err != nil {
		return fail(err)
	}
	e.providerID = func(id string) string { return devenv.OpenStackProviderIDPrefix + id }
	return e, []string{"--cloud-provider=openstack", "--cloud-config=" + cloudConfig}, stop, nil
}

// openstackAPI returns the API (the dialect's path prefix: identity,
// compute, network, load-balancer) and method of a dialect operation such as
// "GET /compute/v2.1/servers/{id}"; ok is false for minicloud's own API.
func openstackAPI(op string) (apiName, method string, ok bool) {
	method, path, found := strings.Cut(op, " ")
	if !found {
		return "", "", false
	}
	for _, p := range []string{mos.IdentityPrefix, mos.ComputePrefix, mos.NetworkPrefix, mos.LoadBalancerPrefix} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return strings.TrimPrefix(p, "/"), method, true
		}
	}
	return "", "", false
}

// servicesWithFloatingIP counts the Services whose ingress is an address of
// the floating-IP pool.
func (e *env) servicesWithFloatingIP(ctx context.Context) (int, error) {
	svcs, err := e.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("list services: %w", err)
	}
	n := 0
	for _, s := range svcs.Items {
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && e.floatingPool.Contains(a) {
				n++
				break
			}
		}
	}
	return n, nil
}

var openstackScenarios = []scenario{
	nodeInitBurst("openstack-node-init-burst", openstackCloud, func(s Sizes) int { return s.OpenStackBurstNodes }),
	steadyState("openstack-steady-state", openstackCloud, func(s Sizes) (int, int) { return s.OpenStackSteadyNodes, 0 }),
	lbBurst("openstack-lb-burst", openstackCloud, func(s Sizes) (int, int) { return s.OpenStackLBNodes, s.OpenStackLBServices }),
	nodeChurn("openstack-node-churn", openstackCloud, func(s Sizes) (int, int) { return s.OpenStackChurnServices, s.OpenStackChurnNodes }),
}

package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"

	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
)

// namePrefix starts every load balancer's name, as upstream's
// (kube_service_<cluster>_<namespace>_<name>), so that a cluster switching
// providers keeps its load balancers.
const namePrefix = "kube_service_"

// uidTag prefixes the tag that records the Service's UID.
const uidTag = "kube_service_uid="

// pendingRetry is how soon stratus asks again about a load balancer
// Octavia is still provisioning.
const pendingRetry = 5 * time.Second

// loadBalancers implements cloudprovider.LoadBalancer and
// pcp.LoadBalancerLister on Octavia, without blocking: while a load
// balancer is PENDING_* its methods return an api.RetryError.
type loadBalancers struct{ c *Cloud }

// GetLoadBalancerName returns upstream's name for the Service's load balancer.
func (l *loadBalancers) GetLoadBalancerName(_ context.Context, clusterName string, svc *v1.Service) string {
	name := namePrefix + clusterName + "_" + svc.Namespace + "_" + svc.Name
	if len(name) > 255 {
		name = name[:255]
	}
	return name
}

func (l *loadBalancers) find(ctx context.Context, lbc *gophercloud.ServiceClient, name string) (*loadbalancers.LoadBalancer, error) {
	pages, err := loadbalancers.List(lbc, loadbalancers.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		return nil, classify("list load balancers named "+name, err)
	}
	all, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, fmt.Errorf("list load balancers named %s: %w", name, err)
	}
	all = slices.DeleteFunc(all, func(lb loadbalancers.LoadBalancer) bool { return lb.ProvisioningStatus == "DELETED" })
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return &all[0], nil
	}
	return nil, fmt.Errorf("%d load balancers are named %s", len(all), name)
}

func pendingErr(lb *loadbalancers.LoadBalancer) error {
	return api.NewRetryError(fmt.Sprintf("load balancer %s (%s) is %s", lb.Name, lb.ID, lb.ProvisioningStatus), pendingRetry)
}

func isPending(s string) bool { return strings.HasPrefix(s, "PENDING_") }

// GetLoadBalancer reports the Service's load balancer and, once ACTIVE, its status.
func (l *loadBalancers) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	lbc, err := l.c.lbClient(ctx)
	if err != nil {
		return nil, false, err
	}
	lb, err := l.find(ctx, lbc, l.GetLoadBalancerName(ctx, clusterName, svc))
	if err != nil || lb == nil {
		return nil, false, err
	}
	if lb.ProvisioningStatus != "ACTIVE" {
		return &v1.LoadBalancerStatus{}, true, nil
	}
	st, err := l.status(ctx, lb, false)
	return st, true, err
}

// port is one Service port as a listener and its pool's member port.
type port struct {
	protocol string
	port     int
	nodePort int
}

func servicePorts(svc *v1.Service) ([]port, error) {
	var out []port
	for _, p := range svc.Spec.Ports {
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != "" {
			return nil, fmt.Errorf("service %s/%s port %d: protocol %s is not supported (TCP or UDP)", svc.Namespace, svc.Name, p.Port, p.Protocol)
		}
		proto := string(p.Protocol)
		if proto == "" {
			proto = "TCP"
		}
		out = append(out, port{protocol: proto, port: int(p.Port), nodePort: int(p.NodePort)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ports", svc.Namespace, svc.Name)
	}
	return out, nil
}

// memberIPs are the nodes' first InternalIPs (IPv4), in node order.
func memberIPs(nodes []*v1.Node) []string {
	var out []string
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP && !strings.Contains(a.Address, ":") {
				out = append(out, a.Address)
				break
			}
		}
	}
	return out
}

func (l *loadBalancers) monitor(name string) *monitors.CreateOpts {
	if !l.c.cfg.CreateMonitor {
		return nil
	}
	return &monitors.CreateOpts{Name: "monitor_" + name, Type: "TCP", Delay: 5, Timeout: 3, MaxRetries: 1, MaxRetriesDown: 3}
}

// EnsureLoadBalancer creates the load balancer fully populated (listeners,
// pools, members, health monitors) in one call and returns an
// api.RetryError until Octavia reports it ACTIVE; then it brings one
// pool's members up to date per call (a batch update) and, once nothing is
// left to change, returns the VIP (or floating IP).
func (l *loadBalancers) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if l.c.cfg.SubnetID == "" {
		return nil, errors.New("openstack config: [LoadBalancer] subnet-id is required to create load balancers")
	}
	ports, err := servicePorts(svc)
	if err != nil {
		return nil, err
	}
	lbc, err := l.c.lbClient(ctx)
	if err != nil {
		return nil, err
	}
	name := l.GetLoadBalancerName(ctx, clusterName, svc)
	lb, err := l.find(ctx, lbc, name)
	if err != nil {
		return nil, err
	}
	ips := memberIPs(nodes)
	if lb == nil {
		opts := loadbalancers.CreateOpts{
			Name: name, Description: fmt.Sprintf("Kubernetes external service %s/%s from cluster %s", svc.Namespace, svc.Name, clusterName),
			VipSubnetID: l.c.cfg.SubnetID, Provider: l.c.cfg.LBProvider, Tags: []string{name, uidTag + string(svc.UID)},
		}
		for i, p := range ports {
			pn := fmt.Sprintf("%d_%s", i, name)
			pool := &pools.CreateOpts{Name: "pool_" + pn, Protocol: pools.Protocol(p.protocol), LBMethod: pools.LBMethodRoundRobin, Members: members(ips, p.nodePort, l.c.cfg.SubnetID)}
			if m := l.monitor(pn); m != nil {
				pool.Monitor = *m
			}
			opts.Listeners = append(opts.Listeners, listeners.CreateOpts{Name: "listener_" + pn, Protocol: listeners.Protocol(p.protocol), ProtocolPort: p.port, DefaultPool: pool})
		}
		lb, err = loadbalancers.Create(ctx, lbc, opts).Extract()
		if err != nil {
			return nil, classify("create load balancer "+name, err)
		}
		return nil, pendingErr(lb)
	}
	switch {
	case isPending(lb.ProvisioningStatus):
		return nil, pendingErr(lb)
	case lb.ProvisioningStatus == "ERROR":
		// Octavia gives up on it: delete it, the next call creates it again.
		if err := l.delete(ctx, lbc, lb); err != nil {
			return nil, err
		}
		return nil, api.NewRetryError(fmt.Sprintf("load balancer %s (%s) was in ERROR; deleted to create it again", name, lb.ID), pendingRetry)
	}
	if err := l.syncMembers(ctx, lbc, lb, ports, ips); err != nil {
		return nil, err
	}
	return l.status(ctx, lb, true)
}

func members(ips []string, port int, subnet string) []pools.CreateMemberOpts {
	out := make([]pools.CreateMemberOpts, 0, len(ips))
	for _, ip := range ips {
		out = append(out, pools.CreateMemberOpts{Address: ip, ProtocolPort: port, SubnetID: subnet})
	}
	return out
}

// syncMembers compares each listener's pool with the nodes and batch-
// updates the first pool that differs, returning an api.RetryError (the
// load balancer is PENDING_UPDATE until Octavia is done).
func (l *loadBalancers) syncMembers(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, ports []port, ips []string) error {
	pages, err := listeners.List(lbc, listeners.ListOpts{LoadbalancerID: lb.ID}).AllPages(ctx)
	if err != nil {
		return classify("list listeners of load balancer "+lb.ID, err)
	}
	ls, err := listeners.ExtractListeners(pages)
	if err != nil {
		return fmt.Errorf("list listeners of load balancer %s: %w", lb.ID, err)
	}
	for _, p := range ports {
		i := slices.IndexFunc(ls, func(x listeners.Listener) bool { return x.Protocol == p.protocol && x.ProtocolPort == p.port })
		if i < 0 || ls[i].DefaultPoolID == "" {
			return fmt.Errorf("load balancer %s has no listener with a pool for %s port %d: changing a Service's ports is not supported yet (recreate the Service)", lb.Name, p.protocol, p.port)
		}
		pool := ls[i].DefaultPoolID
		mp, err := pools.ListMembers(lbc, pool, pools.ListMembersOpts{}).AllPages(ctx)
		if err != nil {
			return classify("list members of pool "+pool, err)
		}
		have, err := pools.ExtractMembers(mp)
		if err != nil {
			return fmt.Errorf("list members of pool %s: %w", pool, err)
		}
		var got, want []string
		for _, m := range have {
			got = append(got, fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort))
		}
		batch := make([]pools.BatchUpdateMemberOpts, 0, len(ips))
		for _, ip := range ips {
			want = append(want, fmt.Sprintf("%s:%d", ip, p.nodePort))
			batch = append(batch, pools.BatchUpdateMemberOpts{Address: ip, ProtocolPort: p.nodePort, SubnetID: &l.c.cfg.SubnetID})
		}
		slices.Sort(got)
		slices.Sort(want)
		if slices.Equal(got, want) {
			continue
		}
		err = pools.BatchUpdateMembers(ctx, lbc, pool, batch).ExtractErr()
		switch {
		case gophercloud.ResponseCodeIs(err, http.StatusConflict):
			return api.NewRetryError(fmt.Sprintf("load balancer %s is busy (409)", lb.Name), pendingRetry)
		case err != nil:
			return classify(fmt.Sprintf("update members of pool %s of load balancer %s", pool, lb.Name), err)
		}
		return api.NewRetryError(fmt.Sprintf("load balancer %s: updating the members of pool %s", lb.Name, pool), pendingRetry)
	}
	return nil
}

// status is the VIP, or the floating IP with [LoadBalancer]
// floating-network-id (created when create is set and there is none).
func (l *loadBalancers) status(ctx context.Context, lb *loadbalancers.LoadBalancer, create bool) (*v1.LoadBalancerStatus, error) {
	if l.c.cfg.FloatingNetworkID == "" {
		return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.VipAddress}}}, nil
	}
	nc, err := l.c.networkClient(ctx)
	if err != nil {
		return nil, err
	}
	fip, err := findFIP(ctx, nc, lb.VipPortID)
	if err != nil {
		return nil, err
	}
	if fip == nil && create {
		fip, err = floatingips.Create(ctx, nc, floatingips.CreateOpts{FloatingNetworkID: l.c.cfg.FloatingNetworkID, PortID: lb.VipPortID, Description: fipDescription(lb)}).Extract()
		if err != nil {
			return nil, classify("create floating IP for load balancer "+lb.Name, err)
		}
	}
	if fip == nil {
		return &v1.LoadBalancerStatus{}, nil
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: fip.FloatingIP}}}, nil
}

func fipDescription(lb *loadbalancers.LoadBalancer) string { return "Floating IP for " + lb.Name }

func findFIP(ctx context.Context, nc *gophercloud.ServiceClient, portID string) (*floatingips.FloatingIP, error) {
	if portID == "" {
		// An empty port_id filter would list every floating IP.
		return nil, nil
	}
	pages, err := floatingips.List(nc, floatingips.ListOpts{PortID: portID}).AllPages(ctx)
	if err != nil {
		return nil, classify("list floating IPs of port "+portID, err)
	}
	all, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	return &all[0], nil
}

// UpdateLoadBalancer brings the pools' members up to date.
func (l *loadBalancers) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	_, err := l.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	return err
}

// EnsureLoadBalancerDeleted deletes the load balancer and its children
// (cascade) and the floating IP this provider created for it.
func (l *loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	lbc, err := l.c.lbClient(ctx)
	if err != nil {
		return err
	}
	lb, err := l.find(ctx, lbc, l.GetLoadBalancerName(ctx, clusterName, svc))
	if err != nil || lb == nil {
		return err
	}
	if lb.ProvisioningStatus == "PENDING_DELETE" {
		return nil
	}
	if isPending(lb.ProvisioningStatus) {
		return pendingErr(lb)
	}
	return l.delete(ctx, lbc, lb)
}

func (l *loadBalancers) delete(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer) error {
	if l.c.cfg.FloatingNetworkID != "" {
		nc, err := l.c.networkClient(ctx)
		if err != nil {
			return err
		}
		fip, err := findFIP(ctx, nc, lb.VipPortID)
		if err != nil {
			return err
		}
		if fip != nil && fip.Description == fipDescription(lb) {
			if err := floatingips.Delete(ctx, nc, fip.ID).ExtractErr(); err != nil && !isNotFound(err) {
				return classify(fmt.Sprintf("delete floating IP %s of load balancer %s", fip.FloatingIP, lb.Name), err)
			}
		}
	}
	err := loadbalancers.Delete(ctx, lbc, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
	switch {
	case err == nil, isNotFound(err):
		return nil
	case gophercloud.ResponseCodeIs(err, http.StatusConflict):
		return api.NewRetryError(fmt.Sprintf("load balancer %s is busy (409)", lb.Name), pendingRetry)
	}
	return classify(fmt.Sprintf("delete load balancer %s (%s)", lb.Name, lb.ID), err)
}

// ListLoadBalancers lists the load balancers named for clusterName, with
// the Service from the name and the UID tag; Provisioning while PENDING_*.
func (l *loadBalancers) ListLoadBalancers(ctx context.Context, clusterName string) ([]pcp.LoadBalancerRef, error) {
	lbc, err := l.c.lbClient(ctx)
	if err != nil {
		return nil, err
	}
	pages, err := loadbalancers.List(lbc, loadbalancers.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, classify("list load balancers", err)
	}
	all, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, fmt.Errorf("list load balancers: %w", err)
	}
	prefix := namePrefix + clusterName + "_"
	var out []pcp.LoadBalancerRef
	for _, lb := range all {
		rest, ok := strings.CutPrefix(lb.Name, prefix)
		// Namespaces hold no "_", so the first one ends it.
		ns, name, ok2 := strings.Cut(rest, "_")
		if !ok || !ok2 || lb.ProvisioningStatus == "DELETED" || lb.ProvisioningStatus == "PENDING_DELETE" {
			continue
		}
		ref := pcp.LoadBalancerRef{Name: lb.Name, ServiceNamespace: ns, ServiceName: name, Provisioning: isPending(lb.ProvisioningStatus)}
		for _, t := range lb.Tags {
			if uid, ok := strings.CutPrefix(t, uidTag); ok {
				ref.ServiceUID = types.UID(uid)
			}
		}
		if lb.ProvisioningStatus == "ACTIVE" && l.c.cfg.FloatingNetworkID == "" {
			ref.Status = &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.VipAddress}}}
		}
		out = append(out, ref)
	}
	return out, nil
}

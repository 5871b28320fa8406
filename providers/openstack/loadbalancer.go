package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	cloudproviderapi "k8s.io/cloud-provider/api"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	"k8s.io/utils/ptr"

	"github.com/stratus-ccm/stratus/pkg/stratus"
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
// stratus.LoadBalancerLister on Octavia, without blocking: while a load
// balancer is PENDING_* its methods return an cloudproviderapi.RetryError.
type loadBalancers struct {
	c *Cloud
	// cfg is c's configuration, with a Service's [LoadBalancerClass]
	// applied in the copy forService returns.
	cfg *Config
}

// ClassAnnotation selects a [LoadBalancerClass "name"] section of cloud.conf
// for a Service, as upstream: its subnet-id and floating-network-id replace
// [LoadBalancer]'s for that Service's load balancer.
const ClassAnnotation = "loadbalancer.openstack.org/class"

// forService returns l with svc's load-balancer class applied, or an error
// naming the annotation when it names no class of cloud.conf.
func (l *loadBalancers) forService(svc *v1.Service) (*loadBalancers, error) {
	name, ok := svc.Annotations[ClassAnnotation]
	if !ok {
		return l, nil
	}
	class := l.cfg.Classes[name]
	if class == nil {
		return nil, fmt.Errorf("service %s/%s: annotation %s: %q names no [LoadBalancerClass %q] section of cloud.conf (%w)",
			svc.Namespace, svc.Name, ClassAnnotation, name, name, ErrUnsupported)
	}
	cfg := *l.cfg
	if class.SubnetID != "" {
		cfg.SubnetID = class.SubnetID
	}
	if class.FloatingNetworkID != "" {
		cfg.FloatingNetworkID = class.FloatingNetworkID
	}
	return &loadBalancers{c: l.c, cfg: &cfg}, nil
}

// mayFloat reports whether some load balancer may have a floating IP: the
// listing, which does not see the Services' classes, cannot tell which.
func (c *Config) mayFloat() bool {
	if c.FloatingNetworkID != "" {
		return true
	}
	for _, class := range c.Classes {
		if class.FloatingNetworkID != "" {
			return true
		}
	}
	return false
}

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
	return cloudproviderapi.NewRetryError(fmt.Sprintf("load balancer %s (%s) is %s", lb.Name, lb.ID, lb.ProvisioningStatus), pendingRetry)
}

func isPending(s string) bool { return strings.HasPrefix(s, "PENDING_") }

// GetLoadBalancer reports the Service's load balancer and, once ACTIVE, its status.
func (l *loadBalancers) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if withClass, err := l.forService(svc); err == nil {
		l = withClass // an unknown class is Ensure's error to report
	}
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

// ErrUnsupported is wrapped by the errors for Service settings this
// provider, or the cloud, cannot implement; each names the field.
var ErrUnsupported = errors.New("not supported by the openstack provider")

// port is what one Service port asks of its listener, pool, members and
// health monitor.
type port struct {
	protocol string
	port     int
	nodePort int
	// cidrs are the listener's allowed_cidrs (sorted; nil: any source).
	cidrs []string
	// persistence is the pool's session persistence type ("" for none).
	persistence string
	// monitor is the pool's health monitor (nil for none) and
	// monitorPort the members' monitor_port (0: their protocol_port).
	monitor     *monitors.CreateOpts
	monitorPort int
}

// wanted reads what the Service asks for. What this provider cannot do is
// an error wrapping ErrUnsupported that names the field.
func (l *loadBalancers) wanted(svc *v1.Service, name string) ([]port, error) {
	key := svc.Namespace + "/" + svc.Name
	if svc.Spec.LoadBalancerIP != "" {
		return nil, fmt.Errorf("service %s: spec.loadBalancerIP: requesting an address is %w (the VIP is allocated on [LoadBalancer] subnet-id)", key, ErrUnsupported)
	}
	ranges, err := servicehelpers.GetLoadBalancerSourceRanges(svc)
	if err != nil {
		return nil, fmt.Errorf("service %s: spec.loadBalancerSourceRanges: %w", key, err)
	}
	var cidrs []string
	if !servicehelpers.IsAllowAll(ranges) {
		cidrs = ranges.StringSlice()
		slices.Sort(cidrs)
	}
	persistence := ""
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		persistence = "SOURCE_IP"
	}
	local := svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort > 0
	var out []port
	for i, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = "TCP"
		}
		if proto != "TCP" && proto != "UDP" {
			return nil, fmt.Errorf("service %s: spec.ports[%d].protocol: %s is %w (TCP and UDP are)", key, i, proto, ErrUnsupported)
		}
		if p.NodePort == 0 {
			return nil, fmt.Errorf("service %s: spec.ports[%d].nodePort: not allocated (spec.allocateLoadBalancerNodePorts: false); members are node ports, so this is %w", key, i, ErrUnsupported)
		}
		w := port{protocol: proto, port: int(p.Port), nodePort: int(p.NodePort), cidrs: cidrs, persistence: persistence}
		if l.cfg.CreateMonitor {
			w.monitor = l.monitor(fmt.Sprintf("monitor_%d_%s", i, name), proto, local)
			if local {
				w.monitorPort = int(svc.Spec.HealthCheckNodePort)
			}
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("service %s has no ports", key)
	}
	return out, nil
}

// monitor is upstream's health monitor for a pool: TCP, UDP-CONNECT for
// UDP, and HTTP GET /healthz (on the members' monitor_port, the health
// check node port) for externalTrafficPolicy Local, where kube-proxy
// answers whether the node has an endpoint.
func (l *loadBalancers) monitor(name, proto string, local bool) *monitors.CreateOpts {
	cfg := l.cfg
	m := &monitors.CreateOpts{Name: name, Type: proto, Delay: seconds(cfg.MonitorDelay), Timeout: seconds(cfg.MonitorTimeout),
		MaxRetries: cfg.MonitorMaxRetries, MaxRetriesDown: cfg.MonitorMaxRetriesDown}
	switch {
	case local:
		m.Type, m.URLPath, m.HTTPMethod, m.ExpectedCodes = "HTTP", "/healthz", "GET", "200"
	case proto == "UDP":
		m.Type = "UDP-CONNECT"
	}
	return m
}

func seconds(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

// members are the pool members for nodes: each node's first IPv4
// InternalIP on the port's NodePort, named after the node, as upstream.
func (l *loadBalancers) members(nodes []*v1.Node, p port) []pools.BatchUpdateMemberOpts {
	var out []pools.BatchUpdateMemberOpts
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP && !strings.Contains(a.Address, ":") {
				m := pools.BatchUpdateMemberOpts{Address: a.Address, ProtocolPort: p.nodePort, Name: ptr.To(n.Name), SubnetID: ptr.To(l.cfg.SubnetID)}
				if p.monitorPort != 0 {
					m.MonitorPort = ptr.To(p.monitorPort)
				}
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func (l *loadBalancers) poolOpts(name string, p port, nodes []*v1.Node) *pools.CreateOpts {
	po := &pools.CreateOpts{Name: "pool_" + name, Protocol: pools.Protocol(p.protocol), LBMethod: pools.LBMethod(l.cfg.LBMethod)}
	if p.persistence != "" {
		po.Persistence = &pools.SessionPersistence{Type: p.persistence}
	}
	for _, m := range l.members(nodes, p) {
		po.Members = append(po.Members, pools.CreateMemberOpts{Address: m.Address, ProtocolPort: m.ProtocolPort, Name: *m.Name, SubnetID: *m.SubnetID, MonitorPort: m.MonitorPort})
	}
	if p.monitor != nil {
		po.Monitor = p.monitor
	}
	return po
}

func (l *loadBalancers) listenerOpts(name string, p port, nodes []*v1.Node) listeners.CreateOpts {
	return listeners.CreateOpts{Name: "listener_" + name, Protocol: listeners.Protocol(p.protocol), ProtocolPort: p.port,
		AllowedCIDRs: p.cidrs, DefaultPool: l.poolOpts(name, p, nodes)}
}

// childName is the name of the listener, pool and monitor of port i.
func childName(i int, name string) string { return fmt.Sprintf("%d_%s", i, name) }

// refusedFields name where an Octavia field the cloud refuses (a 400
// naming it) comes from, for the Service's events and condition.
var refusedFields = []struct{ field, source string }{
	{"lb_algorithm", "[LoadBalancer] lb-method"},
	{"session_persistence", "spec.sessionAffinity"},
	{"allowed_cidrs", "spec.loadBalancerSourceRanges"},
	{"monitor_port", "spec.externalTrafficPolicy: Local with [LoadBalancer] create-monitor"},
	{"type", "[LoadBalancer] create-monitor (health monitor type)"},
	{"protocol", "spec.ports[].protocol"},
	{"provider", "[LoadBalancer] lb-provider"},
}

// write classifies the error of a write to Octavia: 409 (the load
// balancer is busy) is a RetryError; a 400 is the cloud refusing what the
// Service or the configuration asks for, an error wrapping ErrUnsupported
// that names the field and where it comes from.
func write(what string, lbName string, err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	switch {
	case err == nil:
		return nil
	case gophercloud.ResponseCodeIs(err, http.StatusConflict):
		return cloudproviderapi.NewRetryError(fmt.Sprintf("load balancer %s is busy (409)", lbName), pendingRetry)
	case errors.As(err, &ue) && ue.Actual == http.StatusBadRequest:
		body := string(ue.Body)
		for _, f := range refusedFields {
			// "field: ..." (minicloud), "... field/attribute field." (Octavia).
			if strings.Contains(body, f.field+":") || strings.Contains(body, `"`+f.field+`"`) || strings.Contains(body, "attribute "+f.field) {
				return fmt.Errorf("%s: %s (%s) is %w: the cloud refused it: %s", what, f.source, f.field, ErrUnsupported, faultString(ue.Body))
			}
		}
		return fmt.Errorf("%s: %w: the cloud refused it: %s", what, ErrUnsupported, faultString(ue.Body))
	}
	return classify(what, err)
}

// faultString is the message of an error body (Octavia's faultstring,
// else the body).
func faultString(body []byte) string {
	var b struct {
		FaultString string `json:"faultstring"`
	}
	if json.Unmarshal(body, &b) == nil && b.FaultString != "" {
		return b.FaultString
	}
	return strings.TrimSpace(string(body))
}

// EnsureLoadBalancer creates the load balancer fully populated (listeners,
// pools, members, health monitors) in one call and returns an
// cloudproviderapi.RetryError until Octavia reports it ACTIVE. Then each call makes at
// most one change (Octavia accepts one at a time; the load balancer is
// PENDING_UPDATE after each) and returns a RetryError after it: missing
// listeners first (each with its pool), then unwanted ones, then per port
// the allowed CIDRs, the pool's algorithm and persistence, its members
// (one batch update) and its health monitor. Once nothing is left to
// change it returns the VIP (or floating IP).
func (l *loadBalancers) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	l, err := l.forService(svc)
	if err != nil {
		return nil, err
	}
	if l.cfg.SubnetID == "" {
		return nil, errors.New("openstack config: [LoadBalancer] subnet-id is required to create load balancers")
	}
	name := l.GetLoadBalancerName(ctx, clusterName, svc)
	ports, err := l.wanted(svc, name)
	if err != nil {
		return nil, err
	}
	lbc, err := l.c.lbClient(ctx)
	if err != nil {
		return nil, err
	}
	lb, err := l.find(ctx, lbc, name)
	if err != nil {
		return nil, err
	}
	if lb == nil {
		opts := loadbalancers.CreateOpts{
			Name: name, Description: fmt.Sprintf("Kubernetes external service %s/%s from cluster %s", svc.Namespace, svc.Name, clusterName),
			VipSubnetID: l.cfg.SubnetID, Provider: l.cfg.LBProvider, Tags: []string{name, uidTag + string(svc.UID)},
		}
		for i, p := range ports {
			opts.Listeners = append(opts.Listeners, l.listenerOpts(childName(i, name), p, nodes))
		}
		lb, err = loadbalancers.Create(ctx, lbc, opts).Extract()
		if err != nil {
			return nil, write("create load balancer "+name, name, err)
		}
		return nil, pendingErr(lb)
	}
	switch {
	case isPending(lb.ProvisioningStatus):
		return nil, pendingErr(lb)
	case lb.ProvisioningStatus == "ERROR":
		// Octavia gave up on it: delete it with its children at once
		// (they cannot be changed one by one any more), keeping its
		// floating IP for the next one; the next call creates it again.
		if err := l.deleteLB(ctx, lbc, lb, true); err != nil {
			return nil, err
		}
		return nil, cloudproviderapi.NewRetryError(fmt.Sprintf("load balancer %s (%s) was in ERROR; deleting it to create it again", name, lb.ID), pendingRetry)
	}
	if err := l.sync(ctx, lbc, lb, ports, nodes); err != nil {
		return nil, err
	}
	return l.status(ctx, lb, true)
}

// tree is a load balancer's listeners and pools as Octavia lists them.
type tree struct {
	listeners []listeners.Listener
	pools     map[string]pools.Pool
}

func (l *loadBalancers) tree(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer) (*tree, error) {
	pages, err := listeners.List(lbc, listeners.ListOpts{LoadbalancerID: lb.ID}).AllPages(ctx)
	if err != nil {
		return nil, classify("list listeners of load balancer "+lb.Name, err)
	}
	ls, err := listeners.ExtractListeners(pages)
	if err != nil {
		return nil, fmt.Errorf("list listeners of load balancer %s: %w", lb.Name, err)
	}
	pages, err = pools.List(lbc, pools.ListOpts{LoadbalancerID: lb.ID}).AllPages(ctx)
	if err != nil {
		return nil, classify("list pools of load balancer "+lb.Name, err)
	}
	ps, err := pools.ExtractPools(pages)
	if err != nil {
		return nil, fmt.Errorf("list pools of load balancer %s: %w", lb.Name, err)
	}
	t := &tree{listeners: ls, pools: map[string]pools.Pool{}}
	for _, p := range ps {
		t.pools[p.ID] = p
	}
	return t, nil
}

// changed is the RetryError after a write: Octavia is applying it.
func changed(lb *loadbalancers.LoadBalancer, what string) error {
	return cloudproviderapi.NewRetryError(fmt.Sprintf("load balancer %s: %s", lb.Name, what), pendingRetry)
}

// sync makes the first change the tree needs (see EnsureLoadBalancer) and
// returns a RetryError after it, or nil when the tree is as wanted.
func (l *loadBalancers) sync(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, ports []port, nodes []*v1.Node) error {
	t, err := l.tree(ctx, lbc, lb)
	if err != nil {
		return err
	}
	matches := func(x listeners.Listener, p port) bool { return x.Protocol == p.protocol && x.ProtocolPort == p.port }
	// Listeners to add first, so that a changed port or protocol keeps
	// the others serving.
	for i, p := range ports {
		if slices.ContainsFunc(t.listeners, func(x listeners.Listener) bool { return matches(x, p) }) {
			continue
		}
		opts := l.listenerOpts(childName(i, lb.Name), p, nodes)
		opts.LoadbalancerID = lb.ID
		what := fmt.Sprintf("add listener %s/%d", p.protocol, p.port)
		if _, err := listeners.Create(ctx, lbc, opts).Extract(); err != nil {
			return write(what+" to load balancer "+lb.Name, lb.Name, err)
		}
		return changed(lb, what)
	}
	for _, x := range t.listeners {
		if slices.ContainsFunc(ports, func(p port) bool { return matches(x, p) }) {
			continue
		}
		// Its pool first (members and monitor go with it), then itself.
		if _, ok := t.pools[x.DefaultPoolID]; ok {
			if err := pools.Delete(ctx, lbc, x.DefaultPoolID).ExtractErr(); err != nil && !isNotFound(err) {
				return write(fmt.Sprintf("delete pool %s of listener %s/%d of load balancer %s", x.DefaultPoolID, x.Protocol, x.ProtocolPort, lb.Name), lb.Name, err)
			}
			return changed(lb, fmt.Sprintf("deleting the pool of listener %s/%d", x.Protocol, x.ProtocolPort))
		}
		if err := listeners.Delete(ctx, lbc, x.ID).ExtractErr(); err != nil && !isNotFound(err) {
			return write(fmt.Sprintf("delete listener %s/%d of load balancer %s", x.Protocol, x.ProtocolPort, lb.Name), lb.Name, err)
		}
		return changed(lb, fmt.Sprintf("deleting listener %s/%d", x.Protocol, x.ProtocolPort))
	}
	for i, p := range ports {
		x := t.listeners[slices.IndexFunc(t.listeners, func(x listeners.Listener) bool { return matches(x, p) })]
		if err := l.syncPort(ctx, lbc, lb, t, x, childName(i, lb.Name), p, nodes); err != nil {
			return err
		}
	}
	return nil
}

// syncPort brings one listener and its pool to what p asks for: one
// change, then a RetryError.
func (l *loadBalancers) syncPort(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, t *tree, x listeners.Listener, name string, p port, nodes []*v1.Node) error {
	where := fmt.Sprintf("listener %s/%d of load balancer %s", x.Protocol, x.ProtocolPort, lb.Name)
	have := slices.Clone(x.AllowedCIDRs)
	slices.Sort(have)
	if !slices.Equal(have, p.cidrs) && !(len(p.cidrs) == 0 && slices.Equal(have, []string{"0.0.0.0/0"})) {
		cidrs := p.cidrs
		if cidrs == nil {
			cidrs = []string{}
		}
		if _, err := listeners.Update(ctx, lbc, x.ID, listeners.UpdateOpts{AllowedCIDRs: &cidrs}).Extract(); err != nil {
			return write("update the allowed CIDRs of "+where, lb.Name, err)
		}
		return changed(lb, "updating the allowed CIDRs of "+where)
	}
	pool, ok := t.pools[x.DefaultPoolID]
	if !ok {
		opts := l.poolOpts(name, p, nodes)
		opts.ListenerID = x.ID
		if _, err := pools.Create(ctx, lbc, *opts).Extract(); err != nil {
			return write("create the pool of "+where, lb.Name, err)
		}
		return changed(lb, "creating the pool of "+where)
	}
	if pool.LBMethod != l.cfg.LBMethod || pool.Persistence.Type != p.persistence {
		opts := pools.UpdateOpts{LBMethod: pools.LBMethod(l.cfg.LBMethod)}
		if p.persistence != "" {
			opts.Persistence = &pools.SessionPersistence{Type: p.persistence}
		}
		err := pools.Update(ctx, lbc, pool.ID, opts).Err
		if err == nil && p.persistence == "" && pool.Persistence.Type != "" {
			// gophercloud omits a nil persistence; clear it explicitly.
			err = clearPersistence(ctx, lbc, pool.ID)
		}
		if err != nil {
			return write("update pool "+pool.ID+" of "+where, lb.Name, err)
		}
		return changed(lb, "updating the pool of "+where)
	}
	if err := l.syncMembers(ctx, lbc, lb, pool.ID, where, p, nodes); err != nil {
		return err
	}
	return l.syncMonitor(ctx, lbc, lb, pool, where, p)
}

func clearPersistence(ctx context.Context, lbc *gophercloud.ServiceClient, poolID string) error {
	_, err := lbc.Put(ctx, lbc.ServiceURL("lbaas", "pools", poolID), map[string]any{"pool": map[string]any{"session_persistence": nil}}, nil, &gophercloud.RequestOpts{OkCodes: []int{200, 202}})
	return err
}

// syncMembers batch-updates the pool's members when they differ from the
// nodes (address, port, monitor port).
func (l *loadBalancers) syncMembers(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, poolID, where string, p port, nodes []*v1.Node) error {
	mp, err := pools.ListMembers(lbc, poolID, pools.ListMembersOpts{}).AllPages(ctx)
	if err != nil {
		return classify("list members of pool "+poolID, err)
	}
	have, err := pools.ExtractMembers(mp)
	if err != nil {
		return fmt.Errorf("list members of pool %s: %w", poolID, err)
	}
	batch := l.members(nodes, p)
	var got, want []string
	for _, m := range have {
		got = append(got, fmt.Sprintf("%s:%d:%d", m.Address, m.ProtocolPort, m.MonitorPort))
	}
	for _, m := range batch {
		want = append(want, fmt.Sprintf("%s:%d:%d", m.Address, m.ProtocolPort, p.monitorPort))
	}
	slices.Sort(got)
	slices.Sort(want)
	if slices.Equal(got, want) {
		return nil
	}
	if batch == nil {
		batch = []pools.BatchUpdateMemberOpts{}
	}
	if err := pools.BatchUpdateMembers(ctx, lbc, poolID, batch).ExtractErr(); err != nil {
		return write(fmt.Sprintf("update members of pool %s of %s", poolID, where), lb.Name, err)
	}
	return changed(lb, "updating the members of "+where)
}

// syncMonitor creates, replaces (another type), updates or deletes the
// pool's health monitor.
func (l *loadBalancers) syncMonitor(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, pool pools.Pool, where string, p port) error {
	want := p.monitor
	if pool.MonitorID == "" {
		if want == nil {
			return nil
		}
		opts := *want
		opts.PoolID = pool.ID
		if _, err := monitors.Create(ctx, lbc, opts).Extract(); err != nil {
			return write("create the health monitor of "+where, lb.Name, err)
		}
		return changed(lb, "creating the health monitor of "+where)
	}
	if want != nil {
		m, err := monitors.Get(ctx, lbc, pool.MonitorID).Extract()
		if err != nil {
			return classify(fmt.Sprintf("get health monitor %s of %s", pool.MonitorID, where), err)
		}
		if m.Type == want.Type && m.URLPath == want.URLPath {
			if m.Delay == want.Delay && m.Timeout == want.Timeout && m.MaxRetries == want.MaxRetries && m.MaxRetriesDown == want.MaxRetriesDown {
				return nil
			}
			opts := monitors.UpdateOpts{Delay: want.Delay, Timeout: want.Timeout, MaxRetries: want.MaxRetries, MaxRetriesDown: want.MaxRetriesDown}
			if _, err := monitors.Update(ctx, lbc, m.ID, opts).Extract(); err != nil {
				return write("update the health monitor of "+where, lb.Name, err)
			}
			return changed(lb, "updating the health monitor of "+where)
		}
	}
	// Unwanted, or of another type (immutable): delete it; the next call
	// creates the wanted one.
	if err := monitors.Delete(ctx, lbc, pool.MonitorID).ExtractErr(); err != nil && !isNotFound(err) {
		return write("delete the health monitor of "+where, lb.Name, err)
	}
	return changed(lb, "deleting the health monitor of "+where)
}

// status is the VIP, or the floating IP with [LoadBalancer]
// floating-network-id. With create set and none on the VIP port, it
// re-associates one this cluster made for the load balancer (left by a
// load balancer replaced after ERROR), else creates one.
func (l *loadBalancers) status(ctx context.Context, lb *loadbalancers.LoadBalancer, create bool) (*v1.LoadBalancerStatus, error) {
	if l.cfg.FloatingNetworkID == "" {
		return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.VipAddress}}}, nil
	}
	nc, err := l.c.networkClient(ctx)
	if err != nil {
		return nil, err
	}
	fip, err := findFIP(ctx, nc, floatingips.ListOpts{PortID: lb.VipPortID})
	if err != nil {
		return nil, err
	}
	if fip == nil && create {
		fip, err = l.attachFIP(ctx, nc, lb)
		if err != nil {
			return nil, err
		}
	}
	if fip == nil {
		return &v1.LoadBalancerStatus{}, nil
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: fip.FloatingIP}}}, nil
}

// attachFIP gives the VIP port a floating IP: a free one this cluster made
// for this load balancer, else a new one.
func (l *loadBalancers) attachFIP(ctx context.Context, nc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer) (*floatingips.FloatingIP, error) {
	own, err := ownFIPs(ctx, nc, lb)
	if err != nil {
		return nil, err
	}
	for _, f := range own {
		if f.PortID == "" {
			got, err := floatingips.Update(ctx, nc, f.ID, floatingips.UpdateOpts{PortID: &lb.VipPortID}).Extract()
			if err != nil {
				return nil, classify(fmt.Sprintf("associate floating IP %s with load balancer %s", f.FloatingIP, lb.Name), err)
			}
			return got, nil
		}
	}
	got, err := floatingips.Create(ctx, nc, floatingips.CreateOpts{FloatingNetworkID: l.cfg.FloatingNetworkID, PortID: lb.VipPortID, Description: fipDescription(lb.Name)}).Extract()
	if err != nil {
		return nil, classify("create floating IP for load balancer "+lb.Name, err)
	}
	return got, nil
}

// fipDescription marks the floating IPs this provider makes for a load
// balancer; its name holds the cluster's, so no other cluster's floating
// IP is ever reused or deleted.
func fipDescription(lbName string) string { return "Floating IP for " + lbName }

// ownFIPs are the floating IPs this provider made for the load balancer.
func ownFIPs(ctx context.Context, nc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer) ([]floatingips.FloatingIP, error) {
	pages, err := floatingips.List(nc, floatingips.ListOpts{Description: fipDescription(lb.Name)}).AllPages(ctx)
	if err != nil {
		return nil, classify("list the floating IPs of load balancer "+lb.Name, err)
	}
	all, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		return nil, fmt.Errorf("list the floating IPs of load balancer %s: %w", lb.Name, err)
	}
	return slices.DeleteFunc(all, func(f floatingips.FloatingIP) bool { return f.Description != fipDescription(lb.Name) }), nil
}

func findFIP(ctx context.Context, nc *gophercloud.ServiceClient, opts floatingips.ListOpts) (*floatingips.FloatingIP, error) {
	if opts.PortID == "" {
		// An empty port_id filter would list every floating IP.
		return nil, nil
	}
	pages, err := floatingips.List(nc, opts).AllPages(ctx)
	if err != nil {
		return nil, classify("list floating IPs of port "+opts.PortID, err)
	}
	all, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	return &all[0], nil
}

// UpdateLoadBalancer brings the load balancer up to date (the members
// first of all).
func (l *loadBalancers) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	_, err := l.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	return err
}

// EnsureLoadBalancerDeleted deletes the floating IPs this provider made
// for the load balancer, then the load balancer (see deleteLB).
func (l *loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	lbc, err := l.c.lbClient(ctx)
	if err != nil {
		return err
	}
	name := l.GetLoadBalancerName(ctx, clusterName, svc)
	lb, err := l.find(ctx, lbc, name)
	if err != nil {
		return err
	}
	if lb == nil || lb.ProvisioningStatus == "PENDING_DELETE" {
		// A floating IP left by a replaced load balancer goes too.
		return l.deleteFIPs(ctx, &loadbalancers.LoadBalancer{Name: name})
	}
	if isPending(lb.ProvisioningStatus) {
		return pendingErr(lb)
	}
	if err := l.deleteFIPs(ctx, lb); err != nil {
		return err
	}
	return l.deleteLB(ctx, lbc, lb, l.cfg.CascadeDelete)
}

// deleteFIPs deletes the floating IPs this provider made for lb (by their
// description); others, a user's, stay.
func (l *loadBalancers) deleteFIPs(ctx context.Context, lb *loadbalancers.LoadBalancer) error {
	if !l.cfg.mayFloat() {
		return nil
	}
	nc, err := l.c.networkClient(ctx)
	if err != nil {
		return err
	}
	own, err := ownFIPs(ctx, nc, lb)
	if err != nil {
		return err
	}
	for _, f := range own {
		if err := floatingips.Delete(ctx, nc, f.ID).ExtractErr(); err != nil && !isNotFound(err) {
			return classify(fmt.Sprintf("delete floating IP %s of load balancer %s", f.FloatingIP, lb.Name), err)
		}
	}
	return nil
}

// deleteLB deletes the load balancer: in one cascading call, or without
// cascade ([LoadBalancer] cascade-delete = false) its pools and listeners
// first, one per call (each returns a RetryError), then itself. Floating
// IPs are left alone (the caller decides).
func (l *loadBalancers) deleteLB(ctx context.Context, lbc *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, cascade bool) error {
	if !cascade {
		t, err := l.tree(ctx, lbc, lb)
		if err != nil {
			return err
		}
		// One child per pass: each deletion leaves the load balancer
		// PENDING_UPDATE until Octavia is done with it.
		if ids := slices.Sorted(maps.Keys(t.pools)); len(ids) > 0 {
			id := ids[0]
			if err := pools.Delete(ctx, lbc, id).ExtractErr(); err != nil && !isNotFound(err) {
				return write(fmt.Sprintf("delete pool %s of load balancer %s", id, lb.Name), lb.Name, err)
			}
			return changed(lb, "deleting pool "+id+" before the load balancer")
		}
		if len(t.listeners) > 0 {
			x := t.listeners[0]
			if err := listeners.Delete(ctx, lbc, x.ID).ExtractErr(); err != nil && !isNotFound(err) {
				return write(fmt.Sprintf("delete listener %s of load balancer %s", x.ID, lb.Name), lb.Name, err)
			}
			return changed(lb, "deleting listener "+x.ID+" before the load balancer")
		}
	}
	err := loadbalancers.Delete(ctx, lbc, lb.ID, loadbalancers.DeleteOpts{Cascade: cascade}).ExtractErr()
	if err == nil || isNotFound(err) {
		return nil
	}
	return write(fmt.Sprintf("delete load balancer %s (%s)", lb.Name, lb.ID), lb.Name, err)
}

// ListLoadBalancers lists the load balancers named for clusterName, with
// the Service from the name and the UID tag; Provisioning while PENDING_*.
func (l *loadBalancers) ListLoadBalancers(ctx context.Context, clusterName string) ([]stratus.LoadBalancerRef, error) {
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
	var out []stratus.LoadBalancerRef
	for _, lb := range all {
		rest, ok := strings.CutPrefix(lb.Name, prefix)
		// Namespaces hold no "_", so the first one ends it.
		ns, name, ok2 := strings.Cut(rest, "_")
		if !ok || !ok2 || lb.ProvisioningStatus == "DELETED" || lb.ProvisioningStatus == "PENDING_DELETE" {
			continue
		}
		ref := stratus.LoadBalancerRef{Name: lb.Name, ServiceNamespace: ns, ServiceName: name, Provisioning: isPending(lb.ProvisioningStatus)}
		for _, t := range lb.Tags {
			if uid, ok := strings.CutPrefix(t, uidTag); ok {
				ref.ServiceUID = types.UID(uid)
			}
		}
		if lb.ProvisioningStatus == "ACTIVE" && !l.cfg.mayFloat() {
			ref.Status = &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.VipAddress}}}
		}
		out = append(out, ref)
	}
	return out, nil
}

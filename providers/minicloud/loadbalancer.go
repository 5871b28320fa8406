package minicloud

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// ProvisioningRetry is the delay EnsureLoadBalancer asks for (in a
// RetryError) while minicloud is still provisioning a load balancer.
const ProvisioningRetry = 2 * time.Second

// healthCheckPath is kube-proxy's health endpoint on healthCheckNodePort.
const healthCheckPath = "/healthz"

// defaultHealthIntervalSeconds is minicloud's health-check interval when the
// spec sets none (api.HealthCheck).
const defaultHealthIntervalSeconds = 5

// ErrUnsupported is wrapped by the errors for Service settings minicloud
// cannot implement.
var ErrUnsupported = errors.New("not supported by minicloud")

// loadBalancers implements cloudprovider.LoadBalancer and
// stratus.LoadBalancerLister.
type loadBalancers struct {
	api          *client.Client
	inst         *instances
	foreignNodes ForeignNodes
	// clusterHealthCheck is how Cluster-policy targets are probed.
	clusterHealthCheck ClusterHealthCheck
	// Creates, updates and read-backs ask for minicloud's summary view
	// (client.SummaryView): what they use of the answer is the ID, state,
	// VIP and listeners, and at 10,000 nodes decoding each answer's targets
	// and their health was most of the manager's allocations.
	//
	// ids are the IDs of this provider's load balancers by name, as the last
	// create, lookup or listing answered: a backend update with a known ID
	// needs no lookup.
	ids knownIDs
	// pools: the load balancers target shared backend pools (config key
	// backendPools), whose IDs by name poolIDs holds.
	pools   bool
	poolIDs knownIDs
}

// knownIDs maps load-balancer names to the ID and cluster last seen.
type knownIDs struct {
	mu sync.Mutex
	m  map[string]knownID
}

type knownID struct{ id, cluster string }

func (k *knownIDs) put(lb *api.LoadBalancer) {
	if lb == nil {
		return
	}
	k.putID(lb.Name, lb.ID, lb.Tags[TagCluster])
}

// putID records id as the ID of name in cluster.
func (k *knownIDs) putID(name, id, cluster string) {
	if id == "" || name == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]knownID{}
	}
	k.m[name] = knownID{id, cluster}
}

func (k *knownIDs) forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, name)
}

// get returns the ID of load balancer name if it was last seen in cluster.
func (k *knownIDs) get(name, cluster string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[name]
	return v.id, ok && v.cluster == cluster
}

var (
	_ cloudprovider.LoadBalancer = (*loadBalancers)(nil)
	_ stratus.LoadBalancerLister = (*loadBalancers)(nil)
)

// LoadBalancerName is the name of a Service's load balancer: "a" and the
// Service UID without dashes, at most 32 characters (the name upstream's
// DefaultLoadBalancerName gives).
func LoadBalancerName(svc *v1.Service) string {
	name := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// GetLoadBalancerName returns LoadBalancerName(svc).
func (l *loadBalancers) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return LoadBalancerName(svc)
}

// find returns the Service's load balancer in this cluster, or nil.
func (l *loadBalancers) find(ctx context.Context, clusterName string, svc *v1.Service) (*api.LoadBalancer, error) {
	name := LoadBalancerName(svc)
	page, err := l.api.ListLoadBalancersPage(ctx, client.ListOptions{Name: name})
	if err != nil {
		return nil, classify(fmt.Sprintf("service %s/%s: find load balancer %s", svc.Namespace, svc.Name, name), err)
	}
	if len(page.Items) == 0 {
		l.ids.forget(name)
		return nil, nil
	}
	lb := &page.Items[0]
	l.ids.put(lb)
	if owner := lb.Tags[TagCluster]; owner != clusterName {
		return nil, fmt.Errorf("service %s/%s: load balancer %s (%s) belongs to cluster %q, not %q", svc.Namespace, svc.Name, name, lb.ID, owner, clusterName)
	}
	return lb, nil
}

// GetLoadBalancer reports whether the Service's load balancer exists and,
// once it is active, its status.
func (l *loadBalancers) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	lb, err := l.find(ctx, clusterName, svc)
	if err != nil || lb == nil {
		return nil, false, err
	}
	if st := statusOf(lb); st != nil {
		return st, true, nil
	}
	return &v1.LoadBalancerStatus{}, true, nil
}

// EnsureLoadBalancer creates or updates the Service's load balancer. While
// minicloud provisions it, the answer is a RetryError after
// ProvisioningRetry, so no worker waits; once active, its status.
func (l *loadBalancers) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (_ *v1.LoadBalancerStatus, err error) {
	defer func() {
		if l.pools && client.IsInvalid(err) {
			// Perhaps its backend pool was deleted: look it up next time.
			l.poolIDs.forget(PoolName(clusterName, poolKey))
		}
	}()
	what := fmt.Sprintf("ensure load balancer for service %s/%s", svc.Namespace, svc.Name)
	spec, err := specOf(clusterName, svc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	l.probeKubeProxy(&spec, svc)
	if err := l.setTargets(ctx, clusterName, &spec, nodes); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if stratus.LoadBalancerAbsent(ctx) {
		// stratus knows of no load balancer for the Service: create it
		// without a lookup, and trust the answer. No idempotency key: its
		// replay could describe a load balancer deleted since; the unique
		// name prevents duplicates, and its conflict (the load balancer
		// exists after all) takes the usual path.
		var lb *api.LoadBalancer
		err := l.send(ctx, what, spec.Targets, func(targets []api.Target) error {
			spec.Targets = targets
			var err error
			lb, err = l.api.CreateLoadBalancer(ctx, spec, client.SummaryView())
			return err
		})
		switch {
		case err == nil:
			return l.ensuredStatus(lb, svc)
		case !client.IsConflict(err):
			return nil, classify(fmt.Sprintf("%s: create %s", what, spec.Name), err)
		}
	}
	// A load balancer whose ID a listing or an earlier call taught is
	// updated without a lookup (a new leader's re-ensures of Services that
	// changed while none led): the whole load balancer is sent, so an
	// unchanged one costs one write instead of one read.
	if lb, done, err := l.putKnown(ctx, clusterName, what, spec); done {
		if err != nil {
			return nil, err
		}
		return l.ensuredStatus(lb, svc)
	}
	lb, err := l.find(ctx, clusterName, svc)
	if err != nil {
		return nil, err
	}
	switch {
	case lb == nil:
		err = l.send(ctx, what, spec.Targets, func(targets []api.Target) error {
			spec.Targets = targets
			lb, err = l.create(ctx, clusterName, svc, spec)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	case !sameSpec(lb, spec):
		id := lb.ID
		err = l.send(ctx, what, spec.Targets, func(targets []api.Target) error {
			spec.Targets = targets
			lb, err = l.api.UpdateLoadBalancer(ctx, id, spec, client.SummaryView())
			return err
		})
		if err != nil {
			return nil, classify(fmt.Sprintf("%s: update %s", what, id), err)
		}
	}
	return l.ensuredStatus(lb, svc)
}

// ensuredStatus is EnsureLoadBalancer's answer for lb (which it remembers):
// its status once active, a RetryError after ProvisioningRetry while it
// provisions.
func (l *loadBalancers) ensuredStatus(lb *api.LoadBalancer, svc *v1.Service) (*v1.LoadBalancerStatus, error) {
	l.ids.put(lb)
	if st := statusOf(lb); st != nil {
		return st, nil
	}
	return nil, cloudproviderapi.NewRetryError(fmt.Sprintf("load balancer %s (%s) for service %s/%s is provisioning", lb.Name, lb.ID, svc.Namespace, svc.Name), ProvisioningRetry)
}

// create creates the load balancer with an idempotency key derived from the
// Service UID, so a retried create whose first answer was lost creates
// nothing new. The key's record outlives the load balancer, so a Service
// whose load balancer was deleted (type changed back and forth, or removed
// in the cloud) would be answered with the deleted one, or a conflict when
// its spec changed since: then create again without the key; the unique
// name still prevents duplicates.
func (l *loadBalancers) create(ctx context.Context, clusterName string, svc *v1.Service, spec api.LoadBalancerSpec) (*api.LoadBalancer, error) {
	what := "create " + spec.Name
	lb, err := l.api.CreateLoadBalancer(ctx, spec, client.WithIdempotencyKey("stratus-lb-"+string(svc.UID)), client.SummaryView())
	switch {
	case client.IsConflict(err):
		// Created meanwhile under the same name (adopt it), or a stale key.
		if found, err := l.find(ctx, clusterName, svc); found != nil || err != nil {
			return found, err
		}
	case err != nil:
		return nil, classify(what, err)
	default:
		cur, err := l.api.GetLoadBalancer(ctx, lb.ID, client.SummaryView())
		if !client.IsNotFound(err) {
			return cur, classify(what, err)
		}
	}
	klog.FromContext(ctx).V(2).Info("idempotency key names a deleted load balancer; creating anew", "service", klog.KObj(svc))
	lb, err = l.api.CreateLoadBalancer(ctx, spec, client.SummaryView())
	if client.IsConflict(err) {
		if found, ferr := l.find(ctx, clusterName, svc); found != nil || ferr != nil {
			return found, ferr
		}
	}
	return lb, classify(what, err)
}

// UpdateLoadBalancer replaces the targets of the Service's load balancer
// (with backend pools: the pools it targets).
func (l *loadBalancers) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	what := fmt.Sprintf("update load balancer for service %s/%s", svc.Namespace, svc.Name)
	var want api.LoadBalancerSpec
	if err := l.setTargets(ctx, clusterName, &want, nodes); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if done, err := l.updateKnown(ctx, clusterName, svc, what, want); done {
		return err
	}
	lb, err := l.find(ctx, clusterName, svc)
	if err != nil {
		return err
	}
	if lb == nil {
		return fmt.Errorf("%s: load balancer %s does not exist", what, LoadBalancerName(svc))
	}
	if slices.Equal(lb.Targets, want.Targets) && slices.Equal(lb.BackendPools, want.BackendPools) {
		return nil
	}
	spec := specFrom(lb)
	spec.BackendPools = want.BackendPools
	err = l.send(ctx, what, want.Targets, func(targets []api.Target) error {
		spec.Targets = targets
		_, err := l.api.UpdateLoadBalancer(ctx, lb.ID, spec, client.SummaryView())
		return err
	})
	return classify(fmt.Sprintf("%s: update %s", what, lb.ID), err)
}

// updateKnown replaces the targets (and backend pools) of the Service's
// load balancer with want's without a lookup when its ID is known: the whole
// load balancer is sent, as the Service asks for it (what
// EnsureLoadBalancer would make it). done is false when the ID is unknown or
// stale (404: deleted or replaced); then the caller looks it up.
func (l *loadBalancers) updateKnown(ctx context.Context, clusterName string, svc *v1.Service, what string, want api.LoadBalancerSpec) (done bool, err error) {
	if _, ok := l.ids.get(LoadBalancerName(svc), clusterName); !ok {
		return false, nil
	}
	spec, err := specOf(clusterName, svc)
	if err != nil {
		return false, nil // the lookup path reports it as before
	}
	l.probeKubeProxy(&spec, svc)
	spec.BackendPools = want.BackendPools
	spec.Targets = want.Targets
	_, done, err = l.putKnown(ctx, clusterName, what, spec)
	return done, err
}

// putKnown sends spec, a whole load balancer, to the load balancer of its
// name when this provider knows its ID in clusterName, and returns the
// answer. done is false when the ID is unknown or stale (404: deleted or
// replaced, and forgotten); then the caller looks it up.
func (l *loadBalancers) putKnown(ctx context.Context, clusterName, what string, spec api.LoadBalancerSpec) (lb *api.LoadBalancer, done bool, err error) {
	id, ok := l.ids.get(spec.Name, clusterName)
	if !ok {
		return nil, false, nil
	}
	err = l.send(ctx, what, spec.Targets, func(targets []api.Target) error {
		spec.Targets = targets
		var err error
		lb, err = l.api.UpdateLoadBalancer(ctx, id, spec, client.SummaryView())
		return err
	})
	if client.IsNotFound(err) {
		l.ids.forget(spec.Name)
		return nil, false, nil
	}
	if err != nil {
		return nil, true, classify(fmt.Sprintf("%s: update %s", what, id), err)
	}
	l.ids.put(lb)
	return lb, true, nil
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer; one that
// is already gone is fine.
func (l *loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	// A load balancer whose ID is known is deleted without a lookup; a 404
	// (deleted meanwhile, or replaced under the same name) takes the lookup.
	name := LoadBalancerName(svc)
	if id, ok := l.ids.get(name, clusterName); ok {
		err := l.api.DeleteLoadBalancer(ctx, id)
		if !client.IsNotFound(err) {
			if err != nil {
				return classify(fmt.Sprintf("delete load balancer %s for service %s/%s", id, svc.Namespace, svc.Name), err)
			}
			l.ids.forget(name)
			return nil
		}
		l.ids.forget(name)
	}
	lb, err := l.find(ctx, clusterName, svc)
	if err != nil || lb == nil {
		return err
	}
	defer l.ids.forget(lb.Name)
	if err := l.api.DeleteLoadBalancer(ctx, lb.ID); err != nil && !client.IsNotFound(err) {
		return classify(fmt.Sprintf("delete load balancer %s for service %s/%s", lb.ID, svc.Namespace, svc.Name), err)
	}
	return nil
}

// ListLoadBalancers lists the load balancers tagged with clusterName, with
// the Service each serves and, when active, its status.
func (l *loadBalancers) ListLoadBalancers(ctx context.Context, clusterName string) ([]stratus.LoadBalancerRef, error) {
	// The summary view: the references need no targets, and with thousands
	// of nodes behind hundreds of load balancers the full listing is
	// hundreds of megabytes.
	all, err := l.api.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{TagCluster: clusterName}, PageSize: listPageSize, Summary: true})
	if err != nil {
		return nil, classify(fmt.Sprintf("list load balancers of cluster %q", clusterName), err)
	}
	refs := make([]stratus.LoadBalancerRef, 0, len(all))
	for i := range all {
		lb := &all[i]
		l.ids.put(lb)
		refs = append(refs, stratus.LoadBalancerRef{
			Name:             lb.Name,
			ServiceNamespace: lb.Tags[TagServiceNamespace],
			ServiceName:      lb.Tags[TagServiceName],
			ServiceUID:       types.UID(lb.Tags[TagServiceUID]),
			Status:           statusOf(lb),
			Provisioning:     lb.State == api.LBProvisioning,
			Backends:         lb.TargetsDigest,
		})
	}
	return refs, nil
}

// statusOf is the Service status of an active load balancer, nil while it
// is provisioning.
func statusOf(lb *api.LoadBalancer) *v1.LoadBalancerStatus {
	if lb.State != api.LBActive {
		return nil
	}
	// With the PROXY protocol the backends expect a header only the load
	// balancer sends: kube-proxy must not short-circuit traffic to the VIP.
	mode := v1.LoadBalancerIPModeVIP
	if lb.ProxyProtocol {
		mode = v1.LoadBalancerIPModeProxy
	}
	ing := v1.LoadBalancerIngress{IP: lb.VIP, IPMode: &mode}
	for _, ln := range lb.Listeners {
		ing.Ports = append(ing.Ports, v1.PortStatus{Port: int32(ln.Port), Protocol: v1.Protocol(ln.Protocol)})
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{ing}}
}

// probeKubeProxy makes a Cluster-policy load balancer probe kube-proxy's
// /healthz instead of the NodePort when the config asks for it, keeping the
// probe's timing from the Service's annotations.
func (l *loadBalancers) probeKubeProxy(spec *api.LoadBalancerSpec, svc *v1.Service) {
	if l.clusterHealthCheck != ClusterHealthCheckKubeProxy || spec.HealthCheck == nil || servicehelpers.RequestsOnlyLocalTraffic(svc) {
		return
	}
	spec.HealthCheck.Protocol, spec.HealthCheck.Port, spec.HealthCheck.Path = api.ProtocolHTTP, kubeProxyHealthPort, healthCheckPath
}

// specOf is the load balancer a Service asks for, without targets. Settings
// minicloud cannot implement are an error naming the field.
func specOf(clusterName string, svc *v1.Service) (api.LoadBalancerSpec, error) {
	spec := api.LoadBalancerSpec{
		Name: LoadBalancerName(svc),
		Tags: map[string]string{
			TagCluster:          clusterName,
			TagServiceNamespace: svc.Namespace,
			TagServiceName:      svc.Name,
			TagServiceUID:       string(svc.UID),
		},
	}
	if err := checkClusterName(clusterName); err != nil {
		return spec, err
	}
	if svc.Spec.LoadBalancerIP != "" {
		return spec, fmt.Errorf("spec.loadBalancerIP: requesting an address is %w (VIPs are allocated)", ErrUnsupported)
	}
	if len(svc.Spec.Ports) == 0 {
		return spec, errors.New("spec.ports: a load balancer needs at least one port")
	}
	var tcpPort int
	for i, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP {
			return spec, fmt.Errorf("spec.ports[%d].protocol: %s is %w (TCP and UDP are)", i, proto, ErrUnsupported)
		}
		if p.NodePort == 0 {
			return spec, fmt.Errorf("spec.ports[%d].nodePort: not allocated (spec.allocateLoadBalancerNodePorts: false); minicloud forwards to node ports, so a load balancer without them is %w", i, ErrUnsupported)
		}
		if proto == v1.ProtocolTCP && tcpPort == 0 {
			tcpPort = int(p.NodePort)
		}
		spec.Listeners = append(spec.Listeners, api.Listener{Protocol: string(proto), Port: int(p.Port), TargetPort: int(p.NodePort)})
	}
	switch {
	case servicehelpers.RequestsOnlyLocalTraffic(svc) && svc.Spec.HealthCheckNodePort != 0:
		spec.HealthCheck = &api.HealthCheck{Protocol: api.ProtocolHTTP, Port: int(svc.Spec.HealthCheckNodePort), Path: healthCheckPath}
	case tcpPort != 0:
		spec.HealthCheck = &api.HealthCheck{Protocol: api.ProtocolTCP, Port: tcpPort}
	}
	if err := applyAnnotations(svc, &spec); err != nil {
		return spec, err
	}
	ranges, err := servicehelpers.GetLoadBalancerSourceRanges(svc)
	if err != nil {
		return spec, err
	}
	if !servicehelpers.IsAllowAll(ranges) {
		spec.SourceRanges = ranges.StringSlice()
		slices.Sort(spec.SourceRanges)
	}
	return spec, nil
}

// applyAnnotations applies the Service's stratus annotations
// (pkg/annotations) to spec, whose health check is already chosen. The
// controller validated them, but an upstream manager does not, so a bad
// value is an error here too.
func applyAnnotations(svc *v1.Service, spec *api.LoadBalancerSpec) error {
	hc := spec.HealthCheck
	if hc == nil {
		hc = &api.HealthCheck{} // only to detect settings without a health check
	}
	var hcKeys []string // the health-check annotations present
	seconds := func(k *annotations.Key[time.Duration], dst *int) error {
		d, ok, err := k.Get(svc)
		if ok && err == nil {
			*dst = int((d + time.Second - 1) / time.Second)
		}
		return err
	}
	for _, k := range []*annotations.Info{&annotations.LBHealthCheckInterval.Info, &annotations.LBHealthCheckTimeout.Info, &annotations.LBHealthCheckUnhealthyThreshold.Info} {
		if _, ok := svc.Annotations[k.Name]; ok {
			hcKeys = append(hcKeys, k.Name)
		}
	}
	threshold, _, terr := annotations.LBHealthCheckUnhealthyThreshold.Get(svc)
	proxy, _, perr := annotations.LBProxyProtocol.Get(svc)
	algorithm, algorithmSet, aerr := annotations.LBAlgorithm.Get(svc)
	if err := errors.Join(
		seconds(annotations.LBHealthCheckInterval, &hc.IntervalSeconds),
		seconds(annotations.LBHealthCheckTimeout, &hc.TimeoutSeconds),
		terr,
		seconds(annotations.LBIdleTimeout, &spec.IdleTimeoutSeconds),
		perr, aerr); err != nil {
		return err
	}
	if spec.HealthCheck == nil && len(hcKeys) > 0 {
		return fmt.Errorf("annotation %s: the Service has no health check (no TCP port and not externalTrafficPolicy: Local), so health-check settings are %w", hcKeys[0], ErrUnsupported)
	}
	hc.UnhealthyThreshold = threshold
	if interval := cmp.Or(hc.IntervalSeconds, defaultHealthIntervalSeconds); hc.TimeoutSeconds > interval {
		return fmt.Errorf("annotation %s: %ds is longer than the health-check interval (%ds, %s)",
			annotations.LBHealthCheckTimeout.Name, hc.TimeoutSeconds, interval, annotations.LBHealthCheckInterval.Name)
	}
	spec.ProxyProtocol = proxy
	// sessionAffinity: ClientIP asks for a client's connections to reach
	// one endpoint. kube-proxy keeps that promise on each node, not across
	// nodes: the load balancer must send a client to one node, as clouds
	// do for it (GCE's CLIENT_IP target pools, Azure's SourceIP
	// distribution), unless the annotation says otherwise.
	if !algorithmSet && svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		algorithm = annotations.AlgorithmSourceIP
	}
	if algorithm == annotations.AlgorithmSourceIP {
		spec.Algorithm = api.AlgorithmSourceIP
	}
	return nil
}

// targetsOf returns the targets of nodes, sorted: the instances of minicloud
// nodes (nodes without a provider ID are matched to instances by name, with
// one listing) and, when the config says other providers' nodes are reachable
// (foreignNodes: internalIP), the first InternalIP of each of those. Other
// nodes are left out.
func (l *loadBalancers) targetsOf(ctx context.Context, nodes []*v1.Node) ([]api.Target, error) {
	ids, ips, unnamed := l.namedTargets(nodes)
	if len(unnamed) > 0 {
		all, err := l.inst.ListInstances(ctx)
		if err != nil {
			return nil, err
		}
		byName := make(map[string]string, len(all))
		for _, in := range all {
			byName[in.Name], _ = InstanceIDOf(in.Metadata.ProviderID)
		}
		for _, name := range unnamed {
			if id := byName[name]; id != "" {
				ids[id] = true
			}
		}
	}
	return targetList(ids, ips), nil
}

// namedTargets sorts nodes into the instances their provider IDs name, the
// addresses of the foreign nodes that are targets (foreignNodes:
// internalIP), and the names of the nodes without a provider ID, whose
// instances only a listing finds.
func (l *loadBalancers) namedTargets(nodes []*v1.Node) (ids, ips map[string]bool, unnamed []string) {
	ids, ips = map[string]bool{}, map[string]bool{}
	for _, n := range nodes {
		switch id, err := InstanceIDOf(n.Spec.ProviderID); {
		case err == nil:
			ids[id] = true
		case n.Spec.ProviderID == "":
			unnamed = append(unnamed, n.Name)
		case l.foreignNodes == ForeignNodesInternalIP:
			if ip := internalIP(n); ip != "" {
				ips[ip] = true
			}
		}
	}
	return ids, ips, unnamed
}

// targetList is the sorted targets of instances ids and addresses ips.
func targetList(ids, ips map[string]bool) []api.Target {
	targets := make([]api.Target, 0, len(ids)+len(ips))
	for id := range ids {
		targets = append(targets, api.Target{InstanceID: id})
	}
	for ip := range ips {
		targets = append(targets, api.Target{IP: ip})
	}
	sortTargets(targets)
	return targets
}

var _ stratus.BackendsDigester = (*loadBalancers)(nil)

// BackendsDigest is the targets digest minicloud lists for svc's load
// balancer once UpdateLoadBalancer(ctx, clusterName, svc, nodes) succeeded:
// of nodes' instances (and foreign nodes' addresses), or with backend pools
// kept by stratus (stratus.BackendPoolsManaged) of the pool the load balancer
// names. It cannot tell (false) for a node without a provider ID, whose
// instance a listing finds, nor for pools whose members the update would set
// (no stratus mark): the digest does not cover a pool's members.
func (l *loadBalancers) BackendsDigest(ctx context.Context, clusterName string, _ *v1.Service, nodes []*v1.Node) (string, bool) {
	if l.pools {
		if !stratus.BackendPoolsManaged(ctx) {
			return "", false
		}
		return api.TargetsDigest(nil, nil, []string{PoolName(clusterName, poolKey)}), true
	}
	ids, ips, unnamed := l.namedTargets(nodes)
	if len(unnamed) > 0 {
		return "", false
	}
	return api.TargetsDigest(targetList(ids, ips), nil, nil), true
}

// sortTargets orders targets: instances by ID, then addresses.
func sortTargets(targets []api.Target) {
	slices.SortFunc(targets, func(a, b api.Target) int {
		return cmp.Or(
			cmp.Compare(len(a.IP), 0)-cmp.Compare(len(b.IP), 0), // instances first
			strings.Compare(a.InstanceID, b.InstanceID),
			strings.Compare(a.IP, b.IP))
	})
}

// internalIP is the node's first InternalIP, "" when it has none.
func internalIP(n *v1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// send runs a create or update with targets. When minicloud rejects it as
// invalid and some of the instance targets no longer exist (a machine deleted
// while its Node is still kept, e.g. by stratus's deletion guard), it sends once
// more without them: one machine that is gone must not keep a load balancer
// from every other backend. Any other rejection is returned as it is.
//
// A target is left out only when the cloud says its instance does not exist:
// the instance listing lacks it and a lookup of that instance answers 404.
// An empty listing, a failed one or a failed lookup is a doubt, never "gone":
// the rejection is returned and the call retried, so that a cloud whose
// inventory briefly comes back empty cannot empty a load balancer.
func (l *loadBalancers) send(ctx context.Context, what string, targets []api.Target, do func([]api.Target) error) error {
	err := do(targets)
	if !client.IsInvalid(err) || !slices.ContainsFunc(targets, func(t api.Target) bool { return t.InstanceID != "" }) {
		return err
	}
	gone, lerr := l.goneInstances(ctx, targets)
	if lerr != nil || len(gone) == 0 {
		return err
	}
	kept := slices.DeleteFunc(slices.Clone(targets), func(t api.Target) bool { return gone[t.InstanceID] })
	klog.FromContext(ctx).Info("Leaving out load balancer targets whose instances do not exist", "what", what, "instances", slices.Sorted(maps.Keys(gone)))
	return do(kept)
}

// goneInstances returns the instances of targets that do not exist: missing
// from a listing that is not empty, and answered 404 when looked up one by
// one. Any doubt (an empty or failed listing, a lookup that fails otherwise)
// is an error.
func (l *loadBalancers) goneInstances(ctx context.Context, targets []api.Target) (map[string]bool, error) {
	all, err := l.inst.ListInstances(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, errors.New("the instance listing is empty")
	}
	exists := make(map[string]bool, len(all))
	for _, in := range all {
		if id, idErr := InstanceIDOf(in.Metadata.ProviderID); idErr == nil {
			exists[id] = true
		}
	}
	gone := map[string]bool{}
	for _, t := range targets {
		if t.InstanceID == "" || exists[t.InstanceID] || gone[t.InstanceID] {
			continue
		}
		if _, err := l.api.GetInstance(ctx, t.InstanceID); !client.IsNotFound(err) {
			if err == nil {
				err = fmt.Errorf("instance %s exists but was missing from the listing", t.InstanceID)
			}
			return nil, err
		}
		gone[t.InstanceID] = true
	}
	return gone, nil
}

// specFrom is the spec that recreates lb as it is.
func specFrom(lb *api.LoadBalancer) api.LoadBalancerSpec {
	return api.LoadBalancerSpec{Tags: lb.Tags, Listeners: lb.Listeners, Targets: lb.Targets, HealthCheck: lb.HealthCheck, SourceRanges: lb.SourceRanges,
		Algorithm: lb.Algorithm, IdleTimeoutSeconds: lb.IdleTimeoutSeconds, ProxyProtocol: lb.ProxyProtocol, BackendPools: lb.BackendPools}
}

// sameSpec reports whether lb already is what spec asks for.
func sameSpec(lb *api.LoadBalancer, spec api.LoadBalancerSpec) bool {
	cur := specFrom(lb)
	cur.Name = spec.Name
	sortedTargets := slices.Clone(cur.Targets)
	sortTargets(sortedTargets)
	cur.Targets = sortedTargets
	if cur.HealthCheck != nil && spec.HealthCheck != nil && spec.HealthCheck.IntervalSeconds == 0 {
		// The server fills in its default interval.
		hc := *cur.HealthCheck
		hc.IntervalSeconds = 0
		cur.HealthCheck = &hc
	}
	return equality.Semantic.DeepEqual(cur, spec)
}

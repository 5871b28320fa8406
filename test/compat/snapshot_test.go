package compat

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// listAll lists every item of a minicloud collection.
var listAll = client.ListOptions{PageSize: 1000}

// snapshot is what a scenario leaves behind, in the terms the contract
// promises: everything a manager writes to Nodes and Services, and the cloud's
// load balancers and routes. Random values (IDs, IPs, UIDs) are still raw
// here; normalize replaces them by names.
type snapshot struct {
	Nodes         []nodeState    `json:"nodes"`
	Services      []serviceState `json:"services"`
	LoadBalancers []lbState      `json:"loadBalancers"`
	Routes        []routeState   `json:"routes"`
	// Events are the Events the manager recorded, per involved object
	// ("Node/node-a", "Service/web"): a sorted set of "type reason
	// (source component)". Counts, times and messages are left out: they
	// depend on timing and on error texts.
	Events map[string][]string `json:"events,omitempty"`
}

type nodeState struct {
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels,omitempty"`
	Taints     []string          `json:"taints,omitempty"`
	ProviderID string            `json:"providerID,omitempty"`
	Addresses  []string          `json:"addresses,omitempty"`
	// Conditions are the conditions a CCM writes (NetworkUnavailable).
	Conditions []string `json:"conditions,omitempty"`
}

type serviceState struct {
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Type        string            `json:"type"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Finalizers  []string          `json:"finalizers,omitempty"`
	Ingress     []string          `json:"ingress,omitempty"`
	Conditions  []string          `json:"conditions,omitempty"`
}

type lbState struct {
	Name         string            `json:"name"`
	VIP          string            `json:"vip"`
	Tags         map[string]string `json:"tags,omitempty"`
	Listeners    []string          `json:"listeners"`
	Targets      []string          `json:"targets"`
	HealthCheck  string            `json:"healthCheck,omitempty"`
	SourceRanges []string          `json:"sourceRanges,omitempty"`
}

type routeState struct {
	CIDR   string            `json:"cidr"`
	Target string            `json:"target"`
	State  string            `json:"state"`
	Tags   map[string]string `json:"tags,omitempty"`
}

// takeSnapshot reads the state a run left behind. It first waits for the
// events that state implies (and the scenario names): Events are written
// asynchronously, after the change they report.
func (r *run) takeSnapshot(wantEvents []string) (snapshot, map[string]string) {
	r.t.Helper()
	s, names := r.readState()
	want := append(impliedEvents(s), wantEvents...)
	r.waitFor(fmt.Sprintf("events %v", want), func(ctx context.Context) (bool, error) {
		got, err := r.events(ctx)
		if err != nil {
			return false, nil
		}
		// Wanted events are named as upstream records them, so they are
		// looked for as the comparison will see them (lb-provisioning-event).
		seen := snapshot{Events: map[string][]string{}}
		for obj, evs := range got {
			seen.Events[obj] = slices.Clone(evs) // tolerances edit in place
		}
		for _, tol := range tolerances {
			tol.apply(&seen)
		}
		for _, w := range want {
			obj, ev, _ := strings.Cut(w, ": ")
			if !slices.ContainsFunc(seen.Events[obj], func(e string) bool { return strings.HasPrefix(e, ev+" (") }) {
				return false, nil
			}
		}
		s.Events = got
		return true, nil
	})
	return s, names
}

// impliedEvents are the events the final state s proves a manager has
// decided to record ("Node/node-a: Normal Synced"): every initialized Node
// was synced, every Service with ingress had its load balancer ensured.
func impliedEvents(s snapshot) []string {
	var want []string
	for _, n := range s.Nodes {
		if n.ProviderID != "" && !slices.ContainsFunc(n.Taints, func(t string) bool { return strings.HasPrefix(t, cloudproviderapi.TaintExternalCloudProvider+"=") }) {
			want = append(want, "Node/"+n.Name+": Normal Synced")
		}
	}
	for _, svc := range s.Services {
		if len(svc.Ingress) > 0 {
			want = append(want, "Service/"+svc.Name+": Normal EnsuredLoadBalancer")
		}
	}
	return want
}

// managerComponents are the event sources of a cloud controller manager's
// controllers (upstream's names, which stratus keeps). Events of other
// components (e.g. the API server's ipallocator-repair-controller about
// Service/kubernetes) depend on timing, not on the manager.
var managerComponents = map[string]bool{
	"cloud-node-controller":           true,
	"cloud-node-lifecycle-controller": true,
	"service-controller":              true,
	"route_controller":                true,
}

// events returns the Events the manager recorded so far, as snapshot.Events.
func (r *run) events(ctx context.Context) (map[string][]string, error) {
	list, err := r.kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		obj := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
		source := cmp.Or(e.Source.Component, e.ReportingController)
		if !managerComponents[source] {
			continue // the API server's own controllers, racing with the scenario
		}
		ev := fmt.Sprintf("%s %s (%s)", e.Type, e.Reason, source)
		if !slices.Contains(out[obj], ev) {
			out[obj] = append(out[obj], ev)
		}
	}
	for _, evs := range out {
		sort.Strings(evs)
	}
	return out, nil
}

// readState reads the Nodes, Services and cloud state a run left behind
// (of a vSphere scenario: the Nodes only; the simulated vCenter has no load
// balancers or routes).
func (r *run) readState() (snapshot, map[string]string) {
	r.t.Helper()
	var s snapshot
	nodes, err := r.kube.CoreV1().Nodes().List(r.ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatalf("list nodes: %v", err)
	}
	for _, n := range nodes.Items {
		s.Nodes = append(s.Nodes, nodeStateOf(&n))
	}
	if r.vc != nil {
		return s, r.vsphereNames()
	}
	svcs, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).List(r.ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatalf("list services: %v", err)
	}
	for _, svc := range svcs.Items {
		if svc.Name == "kubernetes" {
			continue
		}
		s.Services = append(s.Services, serviceStateOf(&svc))
	}
	lbs, err := r.cloud.Client.ListLoadBalancers(r.ctx, listAll)
	if err != nil {
		r.t.Fatalf("list load balancers: %v", err)
	}
	for _, lb := range lbs {
		s.LoadBalancers = append(s.LoadBalancers, lbStateOf(&lb))
	}
	routes, err := r.cloud.Client.ListRoutes(r.ctx, listAll)
	if err != nil {
		r.t.Fatalf("list routes: %v", err)
	}
	for _, rt := range routes {
		s.Routes = append(s.Routes, routeState{CIDR: rt.DestinationCIDR, Target: rt.TargetInstanceID, State: rt.State, Tags: rt.Tags})
	}
	instances, err := r.cloud.Client.ListInstances(r.ctx, listAll)
	if err != nil {
		r.t.Fatalf("list instances: %v", err)
	}
	return s, namesOf(instances, lbs, svcs.Items)
}

func nodeStateOf(n *corev1.Node) nodeState {
	st := nodeState{Name: n.Name, Labels: n.Labels, ProviderID: n.Spec.ProviderID}
	for _, t := range n.Spec.Taints {
		st.Taints = append(st.Taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	for _, a := range n.Status.Addresses {
		st.Addresses = append(st.Addresses, fmt.Sprintf("%s=%s", a.Type, a.Address))
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			st.Conditions = append(st.Conditions, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
	}
	return st
}

func serviceStateOf(svc *corev1.Service) serviceState {
	st := serviceState{Name: svc.Name, UID: string(svc.UID), Type: string(svc.Spec.Type), Labels: svc.Labels, Annotations: svc.Annotations, Finalizers: svc.Finalizers}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		mode := ""
		if in.IPMode != nil {
			mode = string(*in.IPMode)
		}
		var ports []string
		for _, p := range in.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		st.Ingress = append(st.Ingress, fmt.Sprintf("ip=%s hostname=%s mode=%s ports=%s", in.IP, in.Hostname, mode, strings.Join(ports, ",")))
	}
	for _, c := range svc.Status.Conditions {
		st.Conditions = append(st.Conditions, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return st
}

func lbStateOf(lb *api.LoadBalancer) lbState {
	st := lbState{Name: lb.Name, VIP: lb.VIP, Tags: lb.Tags, SourceRanges: lb.SourceRanges}
	for _, l := range lb.Listeners {
		st.Listeners = append(st.Listeners, fmt.Sprintf("%s %d->%d", l.Protocol, l.Port, l.TargetPort))
	}
	for _, t := range lb.Targets {
		st.Targets = append(st.Targets, t.InstanceID+t.IP)
	}
	sort.Strings(st.Targets)
	if hc := lb.HealthCheck; hc != nil {
		st.HealthCheck = fmt.Sprintf("%s port=%d path=%s interval=%d", hc.Protocol, hc.Port, hc.Path, hc.IntervalSeconds)
	}
	return st
}

// namesOf maps the random values of one run to stable names: instance IDs
// and IPs to the instance's name, VIPs to the load balancer's Service, and
// Service UIDs (and the load-balancer names derived from them) to the
// Service's name.
func namesOf(instances []api.Instance, lbs []api.LoadBalancer, svcs []corev1.Service) map[string]string {
	m := map[string]string{}
	for _, in := range instances {
		m[in.ID] = "<instance " + in.Name + ">"
		m[in.PrivateIP] = "<ip " + in.Name + ">"
		if in.PrivateIPv6 != "" {
			m[in.PrivateIPv6] = "<ipv6 " + in.Name + ">"
		}
		if in.PublicIP != "" {
			m[in.PublicIP] = "<public-ip " + in.Name + ">"
		}
	}
	uids := map[string]string{}
	for _, svc := range svcs {
		uid := string(svc.UID)
		uids[uid] = svc.Name
		m[uid] = "<uid " + svc.Name + ">"
		// The upstream default load-balancer name ("a" + the UID without
		// dashes, at most 32 characters).
		lbName := "a" + strings.ReplaceAll(uid, "-", "")
		m[lbName[:min(32, len(lbName))]] = "<lb-name " + svc.Name + ">"
	}
	for _, lb := range lbs {
		owner := lb.Name
		for uid, name := range uids {
			if strings.Contains(lb.Name, uid) || strings.Contains(lb.Name, strings.ReplaceAll(uid, "-", "")[:31]) {
				owner = name
			}
		}
		m[lb.VIP] = "<vip " + owner + ">"
	}
	return m
}

// normalize returns s as a generic JSON tree with every random value
// replaced by its name: whole strings by exact match, and IDs and UIDs (long,
// fixed-width tokens) also inside longer strings.
func normalize(s snapshot, names map[string]string) any {
	var pairs []string
	for from, to := range names {
		if len(from) >= 12 && !strings.ContainsAny(from, ".:") { // IDs and UIDs, not IPs
			pairs = append(pairs, from, to)
		}
	}
	// Longer tokens first, so that an ID inside a longer name is not
	// replaced before the name.
	sortPairsByLength(pairs)
	rep := strings.NewReplacer(pairs...)
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		panic(err)
	}
	return walk(tree, func(v string) string {
		if n, ok := names[v]; ok {
			return n
		}
		// IPs and IDs inside composed values: "InternalIP=10.0.0.1",
		// "ip=10.0.0.1 hostname= ...", "minicloud://i-0000000001".
		v = token.ReplaceAllStringFunc(v, func(tok string) string {
			if n, ok := names[tok]; ok {
				return n
			}
			return tok
		})
		return rep.Replace(v)
	})
}

// token is a run of characters that an IP, an ID or a UID consists of.
var token = regexp.MustCompile(`[0-9A-Za-z.:-]+`)

func sortPairsByLength(pairs []string) {
	type pair struct{ from, to string }
	ps := make([]pair, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	slices.SortFunc(ps, func(a, b pair) int {
		if d := len(b.from) - len(a.from); d != 0 {
			return d
		}
		return strings.Compare(a.from, b.from)
	})
	for i, p := range ps {
		pairs[2*i], pairs[2*i+1] = p.from, p.to
	}
}

// walk applies f to every string in a JSON tree (values, not keys) and sorts
// lists of objects by their JSON encoding, so that listing order does not
// count as a difference.
func walk(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		for k, e := range x {
			x[k] = walk(e, f)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = walk(e, f)
		}
		if len(x) > 0 {
			if _, ok := x[0].(map[string]any); ok {
				slices.SortFunc(x, func(a, b any) int {
					ja, _ := json.Marshal(a)
					jb, _ := json.Marshal(b)
					return strings.Compare(string(ja), string(jb))
				})
			}
		}
		return x
	}
	return v
}

package statuscmd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/controller/service"
)

// Status is what `stratus status` shows, the -o json document.
type Status struct {
	Time        time.Time    `json:"time"`
	MetricsURL  string       `json:"metricsURL"`
	Leader      Leader       `json:"leader"`
	Providers   []Provider   `json:"providers"`
	Controllers []Controller `json:"controllers"`
	// LoadBalancers counts the LoadBalancer Services by state; Problems
	// lists those not ready.
	LoadBalancers        map[string]int `json:"loadBalancers"`
	LoadBalancerProblems []Object       `json:"loadBalancerProblems"`
	// Nodes counts the nodes by state; Uninitialized and HeldDeletions
	// list the nodes that need a look.
	Nodes         map[string]int `json:"nodes"`
	Uninitialized []Object       `json:"uninitializedNodes"`
	HeldDeletions []Object       `json:"heldDeletions"`
	// Errors are the parts that could not be read (the rest is shown).
	Errors []string `json:"errors,omitempty"`
}

// Leader is who leads, from the Lease, and the replicas.
type Leader struct {
	// Lease is namespace/name; empty Holder when there is no Lease
	// (leader election off).
	Lease       string    `json:"lease"`
	Holder      string    `json:"holder,omitempty"`
	RenewTime   time.Time `json:"renewTime,omitzero"`
	Transitions int32     `json:"transitions"`
	// ScrapedLeads is stratus_leader of the scraped replica.
	ScrapedLeads bool `json:"scrapedReplicaLeads"`
	// Replicas are the manager's pods (by --selector in the Lease's
	// namespace) and whether each is ready.
	Replicas []Replica `json:"replicas"`
}

// Replica is one pod of the manager.
type Replica struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
}

// Provider is one configured provider's health and budget.
type Provider struct {
	Name string `json:"name"`
	// Down is stratus_cloud_provider_down: in an outage.
	Down bool `json:"down"`
	// Plugin is "connected", "disconnected" or "" (not a plugin).
	Plugin    string  `json:"plugin,omitempty"`
	Calls     float64 `json:"calls"`
	Failed    float64 `json:"failedCalls"`
	Throttled float64 `json:"throttled"`
	// Available is the budget's tokens now.
	Available float64 `json:"budgetAvailable"`
	// Priorities are the budget's queue and waits by priority class.
	Priorities []Priority `json:"priorities"`
}

// Priority is the budget of one priority class.
type Priority struct {
	Name     string  `json:"name"`
	Queued   float64 `json:"queued"`
	Calls    uint64  `json:"calls"`
	MeanWait float64 `json:"meanWaitSeconds"`
}

// Controller is one work queue and its controller's reconciles.
type Controller struct {
	Name       string  `json:"name"`
	Depth      float64 `json:"queueDepth"`
	Longest    float64 `json:"longestRunningSeconds"`
	Reconciles float64 `json:"reconciles"`
	Errors     float64 `json:"reconcileErrors"`
	// LastError is the newest Warning event its component recorded.
	LastError *Event `json:"lastError,omitempty"`
}

// Object is a Service or Node that needs a look, and why.
type Object struct {
	Name   string    `json:"name"`
	State  string    `json:"state"`
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Event is a Warning event, shortened.
type Event struct {
	Object  string    `json:"object"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// Source says where to read a manager's state from.
type Source struct {
	Kube kubernetes.Interface
	// MetricsURL is the scraped replica's /metrics; Token is presented
	// as its bearer token; CAFile verifies its certificate (else it is
	// not verified: stratus-ccm's own certificate is self-signed).
	MetricsURL, Token, CAFile string
	// LeaseNamespace and LeaseName name the leader election Lease.
	LeaseNamespace, LeaseName string
	// Selector selects the manager's pods in LeaseNamespace.
	Selector string
}

// componentOf maps the controllers' event components to their work queue
// names (the name label of workqueue_depth).
var componentOf = map[string]string{
	"cloud-node":           "cloud-node-controller",
	"service":              "service-controller",
	"service-nodes":        "", // the backend updates: their events are the service controller's
	"route":                "route_controller",
	"cloud-node-lifecycle": "cloud-node-lifecycle-controller",
}

// Read gathers the status. A part that cannot be read is named in Errors
// and the rest is still read.
func Read(ctx context.Context, src Source) *Status {
	st := &Status{Time: time.Now().UTC(), MetricsURL: src.MetricsURL, LoadBalancers: map[string]int{}, Nodes: map[string]int{}}
	fail := func(format string, args ...any) { st.Errors = append(st.Errors, fmt.Sprintf(format, args...)) }

	families, err := scrape(ctx, src)
	if err != nil {
		fail("metrics: %v", err)
	}
	events, err := listEvents(ctx, src.Kube, "type="+corev1.EventTypeWarning)
	if err != nil {
		fail("events: %v", err)
	}
	holds, err := listEvents(ctx, src.Kube, "reason=NodeDeletionBlocked")
	if err != nil {
		fail("events: %v", err)
	}
	readLeader(ctx, src, st, families, fail)
	st.Providers = providers(families)
	st.Controllers = controllers(families, events)
	if err := readServices(ctx, src.Kube, st); err != nil {
		fail("services: %v", err)
	}
	if err := readNodes(ctx, src.Kube, st, events, holds); err != nil {
		fail("nodes: %v", err)
	}
	return st
}

func scrape(ctx context.Context, src Source) (map[string]*dto.MetricFamily, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: src.CAFile == ""} // stratus-ccm's own certificate is self-signed
	if src.CAFile != "" {
		pem, err := os.ReadFile(src.CAFile)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = x509.NewCertPool()
		if !tlsCfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", src.CAFile)
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.MetricsURL, nil)
	if err != nil {
		return nil, err
	}
	if src.Token != "" {
		req.Header.Set("Authorization", "Bearer "+src.Token)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s (does the token allow get on /metrics?)", src.MetricsURL, resp.Status, strings.TrimSpace(string(body)))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// samples returns the metrics of family name.
func samples(families map[string]*dto.MetricFamily, name string) []*dto.Metric {
	if f := families[name]; f != nil {
		return f.Metric
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func readLeader(ctx context.Context, src Source, st *Status, families map[string]*dto.MetricFamily, fail func(string, ...any)) {
	st.Leader.Lease = src.LeaseNamespace + "/" + src.LeaseName
	for _, m := range samples(families, "stratus_leader") {
		st.Leader.ScrapedLeads = value(m) == 1
	}
	var lease *coordinationv1.Lease
	lease, err := src.Kube.CoordinationV1().Leases(src.LeaseNamespace).Get(ctx, src.LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		fail("lease %s: %v", st.Leader.Lease, err)
	default:
		if h := lease.Spec.HolderIdentity; h != nil {
			st.Leader.Holder = *h
		}
		if t := lease.Spec.RenewTime; t != nil {
			st.Leader.RenewTime = t.UTC()
		}
		if n := lease.Spec.LeaseTransitions; n != nil {
			st.Leader.Transitions = *n
		}
	}
	if src.Selector == "" {
		return
	}
	pods, err := src.Kube.CoreV1().Pods(src.LeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: src.Selector})
	if err != nil {
		fail("pods %s in %s: %v", src.Selector, src.LeaseNamespace, err)
		return
	}
	for _, p := range pods.Items {
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		st.Leader.Replicas = append(st.Leader.Replicas, Replica{Name: p.Name, Ready: ready})
	}
}

func providers(families map[string]*dto.MetricFamily) []Provider {
	by := map[string]*Provider{}
	get := func(name string) *Provider {
		if by[name] == nil {
			by[name] = &Provider{Name: name}
		}
		return by[name]
	}
	for _, m := range samples(families, "stratus_cloud_budget_available") {
		get(label(m, "provider")).Available = value(m)
	}
	for _, m := range samples(families, "stratus_cloud_provider_down") {
		get(label(m, "provider")).Down = value(m) == 1
	}
	for _, m := range samples(families, "stratus_cloud_plugin_connected") {
		p := get(label(m, "provider"))
		p.Plugin = "disconnected"
		if value(m) == 1 {
			p.Plugin = "connected"
		}
	}
	for _, m := range samples(families, "stratus_cloud_requests_total") {
		p := get(label(m, "provider"))
		p.Calls += value(m)
		switch label(m, "outcome") {
		case "error", "transient_error", "throttled":
			p.Failed += value(m)
		}
	}
	for _, m := range samples(families, "stratus_cloud_throttled_total") {
		get(label(m, "provider")).Throttled += value(m)
	}
	prios := map[string]map[string]*Priority{}
	prio := func(provider, name string) *Priority {
		if prios[provider] == nil {
			prios[provider] = map[string]*Priority{}
		}
		if prios[provider][name] == nil {
			prios[provider][name] = &Priority{Name: name}
		}
		return prios[provider][name]
	}
	for _, m := range samples(families, "stratus_cloud_budget_queued") {
		prio(label(m, "provider"), label(m, "priority")).Queued = value(m)
	}
	for _, m := range samples(families, "stratus_cloud_budget_wait_seconds") {
		if h := m.Histogram; h != nil {
			p := prio(label(m, "provider"), label(m, "priority"))
			p.Calls = h.GetSampleCount()
			if p.Calls > 0 {
				p.MeanWait = h.GetSampleSum() / float64(p.Calls)
			}
		}
	}
	var out []Provider
	for name, p := range by {
		for _, pr := range prios[name] {
			p.Priorities = append(p.Priorities, *pr)
		}
		sort.Slice(p.Priorities, func(i, j int) bool { return p.Priorities[i].Name < p.Priorities[j].Name })
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func controllers(families map[string]*dto.MetricFamily, events []corev1.Event) []Controller {
	by := map[string]*Controller{}
	for _, m := range samples(families, "workqueue_depth") {
		name := label(m, "name")
		if _, ours := componentOf[name]; !ours {
			continue // client-go's own queues (certificates)
		}
		if by[name] == nil {
			by[name] = &Controller{Name: name}
		}
		by[name].Depth += value(m)
	}
	for _, m := range samples(families, "workqueue_longest_running_processor_seconds") {
		if c := by[label(m, "name")]; c != nil {
			c.Longest = max(c.Longest, value(m))
		}
	}
	for _, m := range samples(families, "controller_runtime_reconcile_total") {
		if c := by[label(m, "controller")]; c != nil {
			c.Reconciles += value(m)
		}
	}
	for _, m := range samples(families, "controller_runtime_reconcile_errors_total") {
		if c := by[label(m, "controller")]; c != nil {
			c.Errors += value(m)
		}
	}
	var out []Controller
	for name, c := range by {
		for i := range events {
			e := &events[i]
			if componentOf[name] != "" && eventComponent(e) == componentOf[name] {
				c.LastError = &Event{Object: e.InvolvedObject.Kind + " " + objectName(e.InvolvedObject.Namespace, e.InvolvedObject.Name),
					Reason: e.Reason, Message: e.Message, Time: eventTime(e)}
				break // newest first
			}
		}
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// listEvents returns the events of every namespace that fieldSelector
// selects, newest first.
func listEvents(ctx context.Context, cs kubernetes.Interface, fieldSelector string) ([]corev1.Event, error) {
	list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		return nil, err
	}
	evs := list.Items
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(&evs[i]).After(eventTime(&evs[j])) })
	return evs, nil
}

func eventComponent(e *corev1.Event) string {
	if e.Source.Component != "" {
		return e.Source.Component
	}
	return e.ReportingController
}

func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t.UTC()
		}
	}
	return time.Time{}
}

func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func readServices(ctx context.Context, cs kubernetes.Interface, st *Status) error {
	list, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		svc := &list.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
			continue
		}
		state, since := service.LoadBalancerState(svc)
		st.LoadBalancers[state]++
		if state == "ready" {
			continue
		}
		o := Object{Name: objectName(svc.Namespace, svc.Name), State: state, Since: since.UTC(), Detail: "no LoadBalancerReady condition yet"}
		if cond := meta.FindStatusCondition(svc.Status.Conditions, service.ConditionLoadBalancerReady); cond != nil {
			o.Reason, o.Detail = cond.Reason, cond.Message
		}
		st.LoadBalancerProblems = append(st.LoadBalancerProblems, o)
	}
	sort.Slice(st.LoadBalancerProblems, func(i, j int) bool { return st.LoadBalancerProblems[i].Name < st.LoadBalancerProblems[j].Name })
	return nil
}

// heldWithin is how recent a NodeDeletionBlocked event must be for its node
// to count as held now (the lifecycle controller announces a hold again
// while it lasts).
const heldWithin = 10 * time.Minute

func readNodes(ctx context.Context, cs kubernetes.Interface, st *Status, warnings, holds []corev1.Event) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	newest := func(events []corev1.Event, node, reason string) *corev1.Event {
		for i := range events {
			e := &events[i]
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.Reason == reason {
				return e
			}
		}
		return nil
	}
	for _, n := range list.Items {
		uninit := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider })
		if !uninit {
			st.Nodes["initialized"]++
		} else {
			st.Nodes["uninitialized"]++
			o := Object{Name: n.Name, State: "uninitialized", Since: n.CreationTimestamp.UTC()}
			if e := newest(warnings, n.Name, "InitializationFailed"); e != nil {
				o.Reason, o.Detail = e.Reason, e.Message
			}
			st.Uninitialized = append(st.Uninitialized, o)
		}
		if e := newest(holds, n.Name, "NodeDeletionBlocked"); e != nil && st.Time.Sub(eventTime(e)) < heldWithin {
			st.HeldDeletions = append(st.HeldDeletions, Object{Name: n.Name, State: "deletion held", Since: eventTime(e), Reason: e.Reason, Detail: e.Message})
		}
	}
	return nil
}

package statuscmd

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A scrape as stratus-ccm serves it, cut down to what status reads.
const scraped = `
# TYPE stratus_cloud_budget_available gauge
stratus_cloud_budget_available{provider="mc"} 3
# TYPE stratus_cloud_budget_queued gauge
stratus_cloud_budget_queued{priority="lb-write",provider="mc"} 7
stratus_cloud_budget_queued{priority="node-init",provider="mc"} 0
# TYPE stratus_cloud_budget_wait_seconds histogram
stratus_cloud_budget_wait_seconds_bucket{priority="lb-write",provider="mc",le="+Inf"} 4
stratus_cloud_budget_wait_seconds_sum{priority="lb-write",provider="mc"} 2
stratus_cloud_budget_wait_seconds_count{priority="lb-write",provider="mc"} 4
# TYPE stratus_cloud_provider_down gauge
stratus_cloud_provider_down{provider="mc"} 1
# TYPE stratus_cloud_plugin_connected gauge
stratus_cloud_plugin_connected{provider="mc"} 0
# TYPE stratus_cloud_requests_total counter
stratus_cloud_requests_total{method="EnsureLoadBalancer",outcome="transient_error",provider="mc"} 5
stratus_cloud_requests_total{method="ListInstances",outcome="success",provider="mc"} 10
stratus_cloud_requests_total{method="ListInstances",outcome="not_found",provider="mc"} 1
# TYPE stratus_cloud_throttled_total counter
stratus_cloud_throttled_total{provider="mc"} 2
# TYPE workqueue_depth gauge
workqueue_depth{controller="service",name="service"} 12
workqueue_depth{controller="DynamicClientCertificate",name="DynamicClientCertificate"} 0
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="service",result="success"} 30
controller_runtime_reconcile_total{controller="service",result="error"} 3
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller="service"} 3
`

func TestProvidersAndControllers(t *testing.T) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(scraped))
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{{
		Name: "mc", Down: true, Plugin: "disconnected", Calls: 16, Failed: 5, Throttled: 2, Available: 3,
		Priorities: []Priority{{Name: "lb-write", Queued: 7, Calls: 4, MeanWait: 0.5}, {Name: "node-init"}},
	}}
	if diff := cmp.Diff(want, providers(families)); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	events := []corev1.Event{{
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "web"},
		Reason:         "SyncLoadBalancerFailed", Message: "boom", Source: corev1.EventSource{Component: "service-controller"},
		LastTimestamp: metav1.NewTime(at),
	}}
	wantC := []Controller{{Name: "service", Depth: 12, Reconciles: 33, Errors: 3,
		LastError: &Event{Object: "Service default/web", Reason: "SyncLoadBalancerFailed", Message: "boom", Time: at}}}
	if diff := cmp.Diff(wantC, controllers(families, events)); diff != "" {
		t.Errorf("controllers (-want +got):\n%s", diff)
	}
}

package cloud_test

import (
	"context"
	"io"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

const limitedType = "stratus-test-limited"

// limitedCloud limits itself to limitedRate requests per second (burst
// limitedBurst), and its Ensure sends three requests (a lookup, a create, a
// read), each counted.
type limitedCloud struct{ *fake.Cloud }

const (
	limitedRate  = 0.01 // so slow that nothing refills during the test
	limitedBurst = 5
)

func (l *limitedCloud) RequestLimit() (float64, int) { return limitedRate, limitedBurst }

func (l *limitedCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return l, true }

func (l *limitedCloud) EnsureLoadBalancer(ctx context.Context, _ string, _ *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	for range 3 {
		stratus.CountRequest(ctx)
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}}, nil
}

func init() {
	cloudprovider.RegisterCloudProvider(limitedType, func(io.Reader) (cloudprovider.Interface, error) {
		return &limitedCloud{&fake.Cloud{Provider: "limited"}}, nil
	})
}

// available reads stratus_cloud_budget_available for provider.
func available(t *testing.T, provider string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "stratus_cloud_budget_available" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" && l.GetValue() == provider {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no stratus_cloud_budget_available for %s", provider)
	return 0
}

// Without a budget in the configuration, a provider's own request limit is
// its budget, and the budget is spent per request the provider reports, not
// per method call.
func TestBudgetDefaultsToTheProvidersLimit(t *testing.T) {
	set, err := cloud.Build(cloud.FromFlags(limitedType, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := available(t, limitedType); got != limitedBurst {
		t.Fatalf("budget holds %v tokens at start, want the provider's burst %d", got, limitedBurst)
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-limited"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	lb, _ := set.ForService(svc).LoadBalancer()
	if _, err := lb.EnsureLoadBalancer(context.Background(), "c", svc, nil); err != nil {
		t.Fatal(err)
	}
	// Three requests, whatever refilled meanwhile (0.01 per second).
	if got := available(t, limitedType); got < limitedBurst-3 || got > limitedBurst-3+0.5 {
		t.Errorf("after one Ensure of three requests the budget holds %v tokens, want about %d", got, limitedBurst-3)
	}
}

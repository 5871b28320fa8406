package cloud

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// lbListingCloud implements LoadBalancerLister on the provider object.
type lbListingCloud struct{ *fake.Cloud }

func (lbListingCloud) ListLoadBalancers(_ context.Context, cluster string) ([]stratus.LoadBalancerRef, error) {
	return []stratus.LoadBalancerRef{{Name: "lb-" + cluster, ServiceNamespace: "default", ServiceName: "web"}}, nil
}

// v2ListingCloud implements InstanceLister on its InstancesV2 only.
type v2ListingCloud struct{ *fake.Cloud }

func (c v2ListingCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	return v2Lister(c), true
}

type v2Lister struct{ *fake.Cloud }

func (v2Lister) ListInstances(context.Context) ([]stratus.Instance, error) {
	return []stratus.Instance{instance("a", false)}, nil
}

// The wrapped provider still offers the providers' extension interfaces, found on
// the provider object or on its capability implementations, through the layer.
func TestExtensionInterfacesSurviveWrapping(t *testing.T) {
	ctx := t.Context()

	name := uniqueName("lb-lister-test")
	p := NewProvider(name, lbListingCloud{&fake.Cloud{}})
	refs, ok, err := p.ListLoadBalancers(ctx, "kubernetes")
	if !ok || err != nil {
		t.Fatalf("ListLoadBalancers = ok %v, err %v", ok, err)
	}
	want := []stratus.LoadBalancerRef{{Name: "lb-kubernetes", ServiceNamespace: "default", ServiceName: "web"}}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "ListLoadBalancers", OutcomeSuccess)); got != 1 {
		t.Errorf("ListLoadBalancers calls counted = %v, want 1", got)
	}

	name = uniqueName("v2-lister-test")
	p = NewProvider(name, v2ListingCloud{&fake.Cloud{Provider: "test"}})
	list, ok, err := p.ListInstances(ctx)
	if !ok || err != nil || len(list) != 1 || list[0].Name != "a" {
		t.Fatalf("ListInstances = %v, ok %v, err %v; want instance a", list, ok, err)
	}
	if exists, err := p.InstanceExists(ctx, node("a", "test://a")); err != nil || !exists {
		t.Errorf("InstanceExists = %v, %v; want true from the listing", exists, err)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "ListInstances", OutcomeSuccess)); got != 1 {
		t.Errorf("ListInstances calls counted = %v, want 1 (the cache answered the rest)", got)
	}

	if _, ok, _ := NewProvider(uniqueName("plain-test"), &fake.Cloud{}).ListLoadBalancers(ctx, "k"); ok {
		t.Error("ListLoadBalancers ok for a provider without LoadBalancerLister")
	}
}

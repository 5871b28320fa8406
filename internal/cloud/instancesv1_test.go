package cloud

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// A provider with Instances (v1) and Zones only: metadata is assembled from the
// per-field calls (each through the layer), and a node without provider ID is found
// by name; "instance not found" by name means "does not exist", not an error.
func TestInstancesV1ThroughTheLayer(t *testing.T) {
	name := uniqueName("v1-test")
	raw := &fake.Cloud{
		Provider:      "v1cloud",
		Addresses:     []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}},
		ExtID:         map[types.NodeName]string{"by-name": "i-9"},
		ExtIDErr:      map[types.NodeName]error{"missing": cloudprovider.InstanceNotFound},
		InstanceTypes: map[types.NodeName]string{"v1cloud://i-9": "large"},
		Zone:          cloudprovider.Zone{FailureDomain: "zone-b", Region: "region-2"},
		NodeShutdown:  true,
	}
	p := NewProvider(name, raw)
	ctx := t.Context()
	if !p.HasInstances() {
		t.Fatal("HasInstances = false")
	}

	md, err := p.InstanceMetadata(ctx, node("by-name", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := &cloudprovider.InstanceMetadata{
		ProviderID:    "v1cloud://i-9",
		InstanceType:  "large",
		NodeAddresses: raw.Addresses,
		Zone:          "zone-b",
		Region:        "region-2",
	}
	if diff := cmp.Diff(want, md); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	for _, method := range []string{"InstanceID", "NodeAddressesByProviderID", "InstanceTypeByProviderID", "GetZoneByProviderID"} {
		if got := counter(requestsTotal.WithLabelValues(name, method, OutcomeSuccess)); got != 1 {
			t.Errorf("%s calls counted = %v, want 1", method, got)
		}
	}

	if exists, err := p.InstanceExists(ctx, node("missing", "")); err != nil || exists {
		t.Errorf("InstanceExists(missing) = %v, %v; want false, nil", exists, err)
	}
	if down, err := p.InstanceShutdown(ctx, node("missing", "")); err != nil || down {
		t.Errorf("InstanceShutdown(missing) = %v, %v; want false, nil", down, err)
	}
	if down, err := p.InstanceShutdown(ctx, node("x", "v1cloud://i-9")); err != nil || !down {
		t.Errorf("InstanceShutdown = %v, %v; want true", down, err)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "InstanceID", OutcomeNotFound)); got != 2 {
		t.Errorf("InstanceID not_found counted = %v, want 2", got)
	}
}

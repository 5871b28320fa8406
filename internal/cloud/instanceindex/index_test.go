package instanceindex

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
)

func TestFind(t *testing.T) {
	idx := New([]pcp.Instance{
		{Name: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "p://1"}},
		{Name: "b", Metadata: cloudprovider.InstanceMetadata{ProviderID: "p://2"}},
	})
	node := func(name, id string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: id}}
	}
	for _, tc := range []struct {
		node *v1.Node
		want string // instance name; "" = not found
	}{
		{node("x", "p://1"), "a"},
		{node("a", "p://3"), ""}, // a provider ID decides; the name is not consulted
		{node("b", ""), "b"},
		{node("c", ""), ""},
	} {
		got := idx.Find(tc.node)
		if (got == nil) != (tc.want == "") || (got != nil && got.Name != tc.want) {
			t.Errorf("Find(%s, %q) = %v, want %q", tc.node.Name, tc.node.Spec.ProviderID, got, tc.want)
		}
	}
	if idx.Len() != 2 {
		t.Errorf("Len = %d", idx.Len())
	}
}

package instanceindex

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

func TestFind(t *testing.T) {
	idx := New([]stratus.Instance{
		{Name: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "p://1"}},
		{Name: "b", Metadata: cloudprovider.InstanceMetadata{ProviderID: "p://2"}, Hostnames: []string{"b.example", "a"}},
		{Name: "vm-c", Metadata: cloudprovider.InstanceMetadata{ProviderID: "p://3"}, Hostnames: []string{"c.example"},
			SystemUUIDs: []string{"4213ABCD-0000-0000-0000-000000000001", "cdab1342-0000-0000-0000-000000000001"}},
	})
	node := func(name, id, uuid string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: id},
			Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: uuid}}}
	}
	for _, tc := range []struct {
		node *v1.Node
		want string // instance name; "" = not found
	}{
		{node("x", "p://1", ""), "a"},
		{node("x", "P://1", ""), "a"}, // a provider ID in another case names the same machine
		{node("a", "p://4", ""), ""},  // a provider ID decides; the name is not consulted
		{node("b", "", ""), "b"},
		{node("c", "", ""), ""},
		{node("a", "", ""), "a"},         // an instance's name wins over another's host name
		{node("b.example", "", ""), "b"}, // by host name
		{node("c.example", "", ""), "vm-c"},
		{node("unknown", "", "4213abcd-0000-0000-0000-000000000001"), "vm-c"}, // by system UUID, any case
		{node("unknown", "", "CDAB1342-0000-0000-0000-000000000001"), "vm-c"}, // the other byte order
		{node("unknown", "", "00000000-0000-0000-0000-000000000009"), ""},
		{node("x", "p://9", "4213abcd-0000-0000-0000-000000000001"), ""}, // a provider ID decides
	} {
		got := idx.Find(tc.node)
		if (got == nil) != (tc.want == "") || (got != nil && got.Name != tc.want) {
			t.Errorf("Find(%s, %q, %q) = %v, want %q", tc.node.Name, tc.node.Spec.ProviderID, tc.node.Status.NodeInfo.SystemUUID, got, tc.want)
		}
	}
	if idx.Len() != 3 {
		t.Errorf("Len = %d", idx.Len())
	}
}

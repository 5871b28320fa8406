package node

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func addr(t v1.NodeAddressType, a string) v1.NodeAddress { return v1.NodeAddress{Type: t, Address: a} }

func internal(a string) v1.NodeAddress { return addr(v1.NodeInternalIP, a) }
func external(a string) v1.NodeAddress { return addr(v1.NodeExternalIP, a) }
func hostname(a string) v1.NodeAddress { return addr(v1.NodeHostName, a) }
func dns(a string) v1.NodeAddress      { return addr(v1.NodeInternalDNS, a) }

func nodeWith(providedIP string, addrs ...v1.NodeAddress) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{Addresses: addrs}}
	if providedIP != "" {
		n.Annotations = map[string]string{ProvidedNodeIPAnnotation: providedIP}
	}
	return n
}

func TestDesiredAddresses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    *v1.Node
		cloud   []v1.NodeAddress
		want    []v1.NodeAddress // nil: no change
		wantErr bool
	}{
		{
			name:  "empty cloud list keeps the node's addresses",
			node:  nodeWith("", internal("10.0.0.1")),
			cloud: nil,
		},
		{
			name:  "cloud addresses replace the node's",
			node:  nodeWith("", internal("10.0.0.9"), hostname("n")),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), hostname("cloud-n")},
			want:  []v1.NodeAddress{internal("10.0.0.1"), hostname("cloud-n")},
		},
		{
			name:  "kubelet hostname carried over when the cloud has none",
			node:  nodeWith("", hostname("kubelet-n")),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), external("1.2.3.4")},
			want:  []v1.NodeAddress{internal("10.0.0.1"), external("1.2.3.4"), hostname("kubelet-n")},
		},
		{
			name:  "identical list is no change",
			node:  nodeWith("", internal("10.0.0.1"), internal("10.0.0.2"), hostname("n")),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), hostname("n")},
		},
		{
			name:  "reordering across types is a change",
			node:  nodeWith("", internal("10.0.0.1"), external("1.2.3.4")),
			cloud: []v1.NodeAddress{external("1.2.3.4"), internal("10.0.0.1")},
			want:  []v1.NodeAddress{external("1.2.3.4"), internal("10.0.0.1")},
		},
		{
			name:  "reordering within a type is a change",
			node:  nodeWith("", internal("10.0.0.2"), internal("10.0.0.1")),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2")},
			want:  []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2")},
		},
		{
			name:  "duplicate values of one type replace distinct ones",
			node:  nodeWith("", internal("10.0.0.2"), internal("10.0.0.1")),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.1")},
			want:  []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.1")},
		},
		{
			name:  "provided IP keeps one InternalIP, first",
			node:  nodeWith("10.0.0.2"),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), external("1.2.3.4"), dns("n.internal")},
			want:  []v1.NodeAddress{internal("10.0.0.2"), external("1.2.3.4"), dns("n.internal")},
		},
		{
			name:  "provided IP is the external IP",
			node:  nodeWith("1.2.3.4"),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), external("1.2.3.4"), external("1.2.3.5")},
			want:  []v1.NodeAddress{external("1.2.3.4"), internal("10.0.0.1")},
		},
		{
			name:  "provided IP both internal and external keeps both",
			node:  nodeWith("10.0.0.1"),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.3"), external("10.0.0.1"), hostname("h")},
			want:  []v1.NodeAddress{internal("10.0.0.1"), external("10.0.0.1"), hostname("h")},
		},
		{
			name:  "provided IPv6 compared by value, cloud text kept",
			node:  nodeWith("2001:db8::1"),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("2001:DB8:0:0::1")},
			want:  []v1.NodeAddress{internal("2001:DB8:0:0::1")},
		},
		{
			name:  "dual-stack pair in the annotation's order",
			node:  nodeWith("2001:db8::1,10.0.0.2"),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), internal("2001:db8::1"), external("1.2.3.4")},
			want:  []v1.NodeAddress{internal("2001:db8::1"), internal("10.0.0.2"), external("1.2.3.4")},
		},
		{
			name:  "hostname carried over before the provided-IP selection",
			node:  nodeWith("10.0.0.2", hostname("kubelet-n")),
			cloud: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2")},
			want:  []v1.NodeAddress{internal("10.0.0.2"), hostname("kubelet-n")},
		},
		{
			name:    "provided IP the cloud does not report",
			node:    nodeWith("10.0.0.9"),
			cloud:   []v1.NodeAddress{internal("10.0.0.1")},
			wantErr: true,
		},
		{
			name:    "dual-stack request on a single-stack cloud",
			node:    nodeWith("10.0.0.1,2001:db8::1"),
			cloud:   []v1.NodeAddress{internal("10.0.0.1")},
			wantErr: true,
		},
		{
			name:    "unparsable provided IP",
			node:    nodeWith("not-an-ip"),
			cloud:   []v1.NodeAddress{internal("10.0.0.1")},
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := DesiredAddresses(tc.node, tc.cloud)
			if tc.wantErr {
				if !errors.Is(err, ErrProvidedNodeIP) {
					t.Fatalf("err = %v, want ErrProvidedNodeIP", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if changed != (tc.want != nil) {
				t.Fatalf("changed = %v, want %v (got %v)", changed, tc.want != nil, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProvidedNodeIP(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int // number of IPs; 0 = error
	}{
		{"10.0.0.1", 1},
		{"2001:db8::1", 1},
		{"10.0.0.1,2001:db8::1", 2},
		{" 10.0.0.1 , 2001:db8::1 ", 2},
		{"0.0.0.0", 1}, // parses; matches no cloud address later
		{"10.0.0.1,10.0.0.2", 0},
		{"2001:db8::1,2001:db8::2", 0},
		{"10.0.0.1,2001:db8::1,10.0.0.2", 0},
		{"0.0.0.0,2001:db8::1", 0},
		{"10.0.0.1,::", 0},
		{"", 0},
		{"10.0.0.1,", 0},
		{"fe80::1%eth0", 0},
		{"10.0.0", 0},
	} {
		got, err := parseProvidedNodeIP(tc.value)
		if tc.want == 0 {
			if !errors.Is(err, ErrProvidedNodeIP) {
				t.Errorf("parseProvidedNodeIP(%q) = %v, %v; want ErrProvidedNodeIP", tc.value, got, err)
			}
			continue
		}
		if err != nil || len(got) != tc.want {
			t.Errorf("parseProvidedNodeIP(%q) = %v, %v; want %d IPs", tc.value, got, err, tc.want)
		}
	}
}

// FuzzDesiredAddresses checks that the merge never panics on any annotation value
// and never invents an address the cloud or the node did not have.
func FuzzDesiredAddresses(f *testing.F) {
	for _, seed := range []string{"10.0.0.1", "10.0.0.1,2001:db8::1", "::", "0.0.0.0,::", "a,b,c", "", "10.0.0.1,"} {
		f.Add(seed)
	}
	cloudAddrs := []v1.NodeAddress{internal("10.0.0.1"), internal("2001:db8::1"), external("1.2.3.4"), hostname("h")}
	f.Fuzz(func(t *testing.T, value string) {
		node := nodeWith(value, hostname("kubelet"))
		node.Annotations = map[string]string{ProvidedNodeIPAnnotation: value}
		got, _, err := DesiredAddresses(node, cloudAddrs)
		if err != nil {
			return
		}
		for _, a := range got {
			if !containsAddr(cloudAddrs, a) && !containsAddr(node.Status.Addresses, a) {
				t.Fatalf("annotation %q: address %v came from nowhere", value, a)
			}
		}
	})
}

func containsAddr(list []v1.NodeAddress, a v1.NodeAddress) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

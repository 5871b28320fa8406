package vsphere

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/vcsim"
)

func byName(list []stratus.Instance) map[string]stratus.Instance {
	m := map[string]stratus.Instance{}
	for _, i := range list {
		m[i.Name] = i
	}
	return m
}

func TestListInstances(t *testing.T) {
	s := newSim(t)
	s.setGuest("node-0", "node-a", nic("VM Network", "10.0.0.11", "fe80::1"))
	// A template is not a machine.
	s.do("power off node-3", s.srv.PowerOff(s.ctx, "node-3"))
	if err := s.object("node-3").MarkAsTemplate(s.ctx); err != nil {
		t.Fatalf("mark as template: %v", err)
	}
	// VMware Tools reports no address yet.
	s.setGuest("node-2", "node-2")
	_, err := s.srv.Create(s.ctx, vcsim.VMSpec{Name: "worker-1"})
	s.do("create worker-1", err)

	rec := &recorder{}
	c := s.cloud(s.config(""), rec)
	list, err := c.ListInstances(t.Context())
	if err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	got := byName(list)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"node-0", "node-1", "node-2", "worker-1"}; !slices.Equal(names, want) {
		t.Errorf("listed %v, want %v (templates left out)", names, want)
	}
	uuid := s.vm("node-0").UUID
	a := got["node-0"]
	want := stratus.Instance{
		Name: "node-0",
		Metadata: cloudprovider.InstanceMetadata{
			ProviderID:   "vsphere://" + uuid,
			InstanceType: "vsphere-vm.cpu-2.mem-4gb.os-ubuntu",
			NodeAddresses: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "node-a"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.11"},
				{Type: v1.NodeExternalIP, Address: "10.0.0.11"},
			},
		},
		Hostnames:   []string{"node-a"},
		SystemUUIDs: []string{uuid, swapUUID(uuid)},
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("node-0 (-want +got):\n%s", diff)
	}
	if w := got["worker-1"]; w.Metadata.InstanceType != "vsphere-vm.cpu-2.mem-4gb.os-ubuntu" || w.Shutdown || w.MetadataErr != nil {
		t.Errorf("worker-1: type %q, shutdown %t, %v; want a running vsphere-vm.cpu-2.mem-4gb.os-ubuntu", w.Metadata.InstanceType, w.Shutdown, w.MetadataErr)
	}
	// A VM without guest IPs is listed (it exists) with the reason it has no
	// metadata yet.
	noIP := got["node-2"]
	if noIP.MetadataErr == nil || noIP.MetadataErr.Error() != "VM node-2 has no IP addresses yet (VMware Tools not reporting?)" {
		t.Errorf("VM without IPs: MetadataErr = %v", noIP.MetadataErr)
	}
	if noIP.Metadata.ProviderID == "" {
		t.Error("VM without IPs has no provider ID")
	}

	// One retrieve for all VMs, with the narrow property list.
	if n := rec.count("RetrievePropertiesEx"); n != 1 {
		t.Errorf("%d RetrievePropertiesEx calls, want 1", n)
	}
	for _, p := range rec.allPaths() {
		if p == "config" || p == "summary" || p == "guest" || strings.HasPrefix(p, "summary.") {
			t.Errorf("a retrieve asked for %q", p)
		}
	}
	if !slices.Contains(rec.allPaths(), "guest.net") {
		t.Errorf("no retrieve asked for guest.net: %v", rec.allPaths())
	}
	// The session is kept: a second listing logs in no more.
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("Login"); n != 1 {
		t.Errorf("%d logins for two listings, want 1", n)
	}
}

func TestInstanceLookups(t *testing.T) {
	s := newSim(t)
	s.setGuest("node-0", "node-a.example.com", nic("VM Network", "10.0.0.11"))
	s.setGuest("node-1", "", nic("VM Network", "10.0.0.12"))
	s.setGuest("node-2", "node-2")
	c := s.cloud(s.config(""), nil)
	uuid := s.vm("node-0").UUID
	node := func(name, providerID, systemUUID string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID},
			Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: systemUUID}}}
	}
	for _, tc := range []struct {
		name string
		node *v1.Node
		want string // provider ID; "" = not found
	}{
		{"provider ID", node("x", "vsphere://"+uuid, ""), "vsphere://" + uuid},
		{"provider ID in upper case", node("x", "vsphere://"+strings.ToUpper(uuid), ""), "vsphere://" + uuid},
		{"provider ID byte-swapped", node("x", "vsphere://"+swapUUID(uuid), ""), "vsphere://" + uuid},
		{"VM name", node("node-0", "", ""), "vsphere://" + uuid},
		{"guest host name", node("node-a.example.com", "", ""), "vsphere://" + uuid},
		{"system UUID as vSphere reports it", node("other", "", strings.ToUpper(uuid)), "vsphere://" + uuid},
		{"system UUID as kubelet reads it", node("other", "", strings.ToUpper(swapUUID(uuid))), "vsphere://" + uuid},
		{"unknown provider ID", node("node-0", "vsphere://00000000-0000-0000-0000-000000000001", ""), ""},
		{"unknown name", node("nobody", "", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, err := c.InstanceMetadata(t.Context(), tc.node)
			exists, eerr := c.InstanceExists(t.Context(), tc.node)
			if eerr != nil {
				t.Fatalf("InstanceExists: %v", eerr)
			}
			if tc.want == "" {
				if !errors.Is(err, cloudprovider.InstanceNotFound) || exists {
					t.Fatalf("InstanceMetadata error = %v, exists = %t; want InstanceNotFound and false", err, exists)
				}
				return
			}
			if err != nil || !exists {
				t.Fatalf("InstanceMetadata = %v, exists = %t", err, exists)
			}
			if md.ProviderID != tc.want || md.NodeAddresses[0] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "node-a.example.com"}) {
				t.Errorf("metadata = %+v", md)
			}
		})
	}
	// No guest host name: the addresses are the IPs only (upstream would
	// refuse the VM).
	md, err := c.InstanceMetadata(t.Context(), node("node-1", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.12"}, {Type: v1.NodeExternalIP, Address: "10.0.0.12"}}; !slices.Equal(md.NodeAddresses, want) {
		t.Errorf("addresses = %v, want %v", md.NodeAddresses, want)
	}
	// A VM without IPs exists, but its metadata is an error saying why.
	noIP := node("node-2", "", "")
	if _, err := c.InstanceMetadata(t.Context(), noIP); err == nil || !strings.Contains(err.Error(), "VM node-2 has no IP addresses yet (VMware Tools not reporting?)") {
		t.Errorf("InstanceMetadata of a VM without IPs: %v", err)
	}
	if ok, err := c.InstanceExists(t.Context(), noIP); !ok || err != nil {
		t.Errorf("InstanceExists of a VM without IPs = %t, %v", ok, err)
	}
}

func TestPowerOffAndDestroy(t *testing.T) {
	s := newSim(t)
	c := s.cloud(s.config(""), nil)
	node := nodeNamed("node-1")
	if down, err := c.InstanceShutdown(t.Context(), node); err != nil || down {
		t.Fatalf("InstanceShutdown of a running VM = %t, %v", down, err)
	}
	s.do("power off", s.srv.PowerOff(s.ctx, "node-1"))
	if down, err := c.InstanceShutdown(t.Context(), node); err != nil || !down {
		t.Fatalf("InstanceShutdown of a powered-off VM = %t, %v", down, err)
	}
	if ok, err := c.InstanceExists(t.Context(), node); err != nil || !ok {
		t.Fatalf("InstanceExists of a powered-off VM = %t, %v", ok, err)
	}
	s.do("destroy", s.srv.Destroy(s.ctx, "node-1"))
	if ok, err := c.InstanceExists(t.Context(), node); err != nil || ok {
		t.Fatalf("InstanceExists of a destroyed VM = %t, %v", ok, err)
	}
	list, err := c.ListInstances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byName(list)["node-1"]; ok || len(list) != 3 {
		t.Errorf("listing after destroy: %d instances, destroyed VM listed: %t", len(list), ok)
	}
}

func nodeNamed(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	"github.com/stratus-ccm/stratus/providers/openstack"
)

// A joining node (uninitialized: no provider ID, only the Hostname address
// kubelet reports) whose server the instance listing already shows is a pool
// member at once, at the InternalIP the listing gives it. OpenStack's
// members are node addresses; had the node gone to the provider without
// them it would be left out, and since the address patch of its
// initialization changes no backend set, it would stay out. No node
// controller runs here, so the node never gets addresses of its own.
func TestJoiningNodeMemberAtItsListedAddress(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{OpenStack: &mos.Options{}})
	pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: mc.IdentityURL, Username: "t", Password: mc.Token,
		DomainName: mos.DomainName, TenantName: mos.ProjectName, AllowReauth: true})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := gos.NewNetworkV2(pc, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := gos.NewLoadBalancerV2(pc, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := subnets.List(nc, subnets.ListOpts{Name: "vips"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subs, _ := subnets.ExtractSubnets(pages)
	if len(subs) != 1 {
		t.Fatalf("vips subnets: %+v", subs)
	}
	conf := fmt.Sprintf("[Global]\nauth-url = %s\nusername = ccm\npassword = %s\nuser-domain-name = %s\ntenant-name = %s\ndomain-name = %s\nregion = %s\n[LoadBalancer]\nsubnet-id = %s\n",
		mc.IdentityURL, mc.Token, mos.DomainName, mos.ProjectName, mos.DomainName, minicloud.Region, subs[0].ID)
	cfg, err := openstack.ParseConfig(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	osc, err := openstack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := cloud.NewProvider("openstack", osc)
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, cloud.Single(p),
		Options{ClusterName: "os-join-test", NodeInitWait: time.Hour, NodeUpdateWindow: 100 * time.Millisecond})

	create := func(i int) *api.Instance {
		in, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: minicloud.Zones[0]})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	setAddresses := func(i int, addrs []v1.NodeAddress) {
		n, err := h.cs.CoreV1().Nodes().Get(ctx, h.nodeName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = addrs
		if _, err := h.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first := create(0)
	h.createNodes(0, 1, func(n *v1.Node) { n.Spec.ProviderID = "openstack:///" + first.ID })
	setAddresses(0, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: first.PrivateIP}})
	h.createService(lbService("web"))
	h.waitIngress("web", 60*time.Second)

	joining := create(1)
	// The node controller's listing, as it makes one to initialize nodes.
	if _, _, err := p.ListInstances(ctx); err != nil {
		t.Fatal(err)
	}
	h.createNodes(1, 2, func(n *v1.Node) {
		n.Spec.ProviderID = ""
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	})
	setAddresses(1, []v1.NodeAddress{{Type: v1.NodeHostName, Address: h.nodeName(1)}})

	var members []string
	h.eventually(30*time.Second, "the joining node's listed InternalIP among the pool's members", func() (bool, error) {
		members = nil
		pages, err := pools.List(lc, pools.ListOpts{}).AllPages(ctx)
		if err != nil {
			return false, nil
		}
		ps, _ := pools.ExtractPools(pages)
		for _, pl := range ps {
			pages, err := pools.ListMembers(lc, pl.ID, pools.ListMembersOpts{}).AllPages(ctx)
			if err != nil {
				return false, nil
			}
			ms, _ := pools.ExtractMembers(pages)
			for _, m := range ms {
				members = append(members, m.Name+"="+m.Address)
			}
		}
		return slices.Contains(members, h.nodeName(1)+"="+joining.PrivateIP), nil
	})
	if !slices.Contains(members, h.nodeName(0)+"="+first.PrivateIP) {
		t.Errorf("members %v: the initialized node %s=%s is missing", members, h.nodeName(0), first.PrivateIP)
	}
	if n, err := h.cs.CoreV1().Nodes().Get(ctx, h.nodeName(1), metav1.GetOptions{}); err != nil || len(n.Status.Addresses) != 1 {
		t.Errorf("the joining Node: %v, addresses %v; the service controller must not write Nodes", err, n.Status.Addresses)
	}
}

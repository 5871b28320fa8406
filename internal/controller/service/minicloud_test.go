package service

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/testenv"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// nodePortResponder stands in for kube-proxy and a backend pod on a node: it
// answers HTTP on ip:port with the node's name.
func nodePortResponder(t *testing.T, node, ip string, port int32) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		t.Fatalf("node %s: listen on its NodePort: %v", node, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, node) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// With minicloud: a LoadBalancer Service gets the VIP as ingress, and an HTTP
// request to it goes through minicloud's load balancer to the NodePort of a
// node's instance; deleting the Service deletes the load balancer.
func TestMinicloudLoadBalancer(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 300 * time.Millisecond})
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, clouds, Options{ClusterName: "mc-test"})

	// The NodePort is chosen here so that the responders listen before the
	// load balancer's first health probe.
	nodePort := h.createServiceWithFreeNodePort(t)
	for i := range 2 {
		inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		nodePortResponder(t, h.nodeName(i), inst.PrivateIP, nodePort)
		h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })
	}
	h.updateService("web", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeLoadBalancer })

	svc := h.waitIngress("web", 30*time.Second)
	ing := svc.Status.LoadBalancer.Ingress[0]
	lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
	if err != nil || len(lbs) != 1 || lbs[0].VIP != ing.IP || lbs[0].Tags[mcprovider.TagCluster] != "mc-test" {
		t.Fatalf("cloud load balancers for the Service: %+v (%v); want one with VIP %s in cluster mc-test", lbs, err, ing.IP)
	}
	if len(lbs[0].Targets) != 2 {
		t.Errorf("targets %+v, want both node instances", lbs[0].Targets)
	}

	// A request through the VIP reaches a node; over a few, both.
	// A fresh connection per request: the load balancer balances connections.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	seen := map[string]bool{}
	h.eventually(20*time.Second, "HTTP through the VIP reaching both nodes", func() (bool, error) {
		resp, err := hc.Get("http://" + net.JoinHostPort(ing.IP, "80") + "/")
		if err != nil {
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen[strings.TrimSpace(string(body))] = true
		return seen[h.nodeName(0)] && seen[h.nodeName(1)], nil
	})

	if err := h.cs.CoreV1().Services(h.ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "load balancer deleted", func() (bool, error) {
		lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
		return err == nil && len(lbs) == 0, nil
	})
	if !minicloudtest.Refused(net.JoinHostPort(ing.IP, "80")) {
		t.Error("the VIP still accepts connections")
	}
}

// createServiceWithFreeNodePort creates Service "web" as type NodePort with a
// NodePort it picks, retrying while the port is allocated, and returns it.
func (h *harness) createServiceWithFreeNodePort(t *testing.T) int32 {
	t.Helper()
	var lastErr error
	for range 20 {
		port := int32(30000 + rand.IntN(2768))
		svc := lbService("web", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = port
		})
		if _, lastErr = h.cs.CoreV1().Services(h.ns).Create(h.ctx, svc, metav1.CreateOptions{}); lastErr == nil {
			return port
		}
	}
	t.Fatalf("create service web with a free NodePort: %v", lastErr)
	return 0
}

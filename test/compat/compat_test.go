package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// scenario is one upstream behavior (docs/design/upstream-behaviors.md), run against both managers.
type scenario struct {
	name string
	// routes runs the managers with the route controller (--cluster-cidr).
	routes bool
	// differences are the IDs (docs/differences.md) of deliberate
	// differences this scenario exercises; their effect on the final state is
	// hidden by tolerances or by the stratus-only flags of startRun.
	differences []string
	// vsphereDualStack gives a vSphere scenario's VMs an IPv6 address
	// besides the IPv4 one, and the providers ipFamily [ipv4, ipv6].
	vsphereDualStack bool
	// settle bounds each wait of the scenario (default settleTimeout).
	settle time.Duration
	// events are events ("Service/web: Normal UpdatedLoadBalancer") the
	// final state does not imply but the scenario causes: the snapshot
	// waits for them (besides those impliedEvents derives) before it reads
	// all events.
	events []string
	// run acts as kubelets and users do and waits until the expected final
	// state holds; the caller then compares both sides' snapshots.
	run func(r *run)
}

// TestUpstreamParity runs every scenario against the upstream CCM and
// stratus-ccm and fails on any difference docs/differences.md does not list.
func TestUpstreamParity(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			// Most of a scenario's time is spent waiting for managers'
			// periods; -test.parallel bounds how many run at once.
			t.Parallel()
			compareSides(t, []side{upstream, stratus}, func(t *testing.T, s side) any {
				r := startRun(t, s, sc)
				sc.run(r)
				snap, names := r.takeSnapshot(sc.events)
				for _, tol := range tolerances {
					tol.apply(&snap)
				}
				got := normalize(snap, names)
				if testing.Verbose() {
					js, _ := json.MarshalIndent(got, "", "  ")
					t.Logf("final state (normalized):\n%s", js)
				}
				return got
			}, func(got []any) {
				if d := cmp.Diff(got[0], got[1]); d != "" {
					t.Errorf("stratus-ccm differs from the upstream CCM in ways docs/differences.md does not list (-upstream +stratus):\n%s", d)
				}
			})
		})
	}
}

// Test objects' fixed values: node ports are chosen here, not by the API
// server, so that both sides' load balancers forward to the same ports.
const (
	svcName  = "web"
	nodePort = 30080
)

func lbService(mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: metav1.NamespaceDefault},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: nodePort}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

// nodes creates instances and joins them as Nodes, then waits until all are
// initialized.
func (r *run) nodes(names ...string) map[string]*api.Instance {
	r.t.Helper()
	insts := map[string]*api.Instance{}
	for _, n := range names {
		insts[n] = r.instance(n, false)
		r.join(insts[n], nodeOptions{})
	}
	for _, n := range names {
		r.waitNode(n, "initialized", initialized)
	}
	return insts
}

func (r *run) createService(svc *corev1.Service) *corev1.Service {
	r.t.Helper()
	created, err := r.kube.CoreV1().Services(svc.Namespace).Create(r.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return created
}

// updateService applies mutate to the current Service, retrying conflicts
// with the manager's own writes.
func (r *run) updateService(name string, mutate func(*corev1.Service)) {
	r.t.Helper()
	r.waitFor("update of service "+name, func(ctx context.Context) (bool, error) {
		svc, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(svc)
		_, err = r.kube.CoreV1().Services(metav1.NamespaceDefault).Update(ctx, svc, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// lbReady waits until the Service has ingress and its one load balancer is
// active with the wanted number of targets and listeners matching ports.
func (r *run) lbReady(name string, targets int, ports ...int) {
	r.t.Helper()
	r.waitService(name, "ingress", func(s *corev1.Service) bool {
		if !hasIngress(s) || !slices.Contains(s.Finalizers, "service.kubernetes.io/load-balancer-cleanup") {
			return false
		}
		var got []int
		for _, p := range s.Status.LoadBalancer.Ingress[0].Ports {
			got = append(got, int(p.Port))
		}
		return len(got) == 0 || slices.Equal(got, ports)
	})
	r.waitCloud(fmt.Sprintf("one active load balancer with %d targets, ports %v", targets, ports), func(lbs []api.LoadBalancer, _ []api.Route) bool {
		if len(lbs) != 1 || lbs[0].State != api.LBActive || len(lbs[0].Targets) != targets || len(lbs[0].Listeners) != len(ports) {
			return false
		}
		for i, l := range lbs[0].Listeners {
			if l.Port != ports[i] {
				return false
			}
		}
		return true
	})
}

// noLoadBalancers waits until the cloud has no load balancers.
func (r *run) noLoadBalancers() {
	r.t.Helper()
	r.waitCloud("no load balancers", func(lbs []api.LoadBalancer, _ []api.Route) bool { return len(lbs) == 0 })
}

// addressCount is a waitNode condition: initialized with n addresses.
func addressCount(n int) func(*corev1.Node) bool {
	return func(node *corev1.Node) bool { return initialized(node) && len(node.Status.Addresses) == n }
}

func hasTaint(key string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
	}
}

var scenarios = []scenario{
	{
		name:        "node-init",
		differences: []string{"node-addresses-first"},
		run: func(r *run) {
			r.nodes("node-a")
		},
	},
	{
		name: "node-init-provided-ip",
		run: func(r *run) {
			inst := r.instance("node-a", true)
			r.join(inst, nodeOptions{providedIP: providedIPv4})
			r.waitNode("node-a", "initialized", initialized)
		},
	},
	{
		name:        "node-init-dual-stack",
		differences: []string{"node-addresses-first"},
		run: func(r *run) {
			r.join(r.createInstance(api.InstanceCreate{Name: "node-a", IPv6: true, PublicIP: true}), nodeOptions{})
			r.waitNode("node-a", "initialized with both families", addressCount(4))
		},
	},
	{
		name: "node-init-dual-stack-provided-ips",
		run: func(r *run) {
			r.join(r.createInstance(api.InstanceCreate{Name: "node-a", IPv6: true, PublicIP: true}), nodeOptions{providedIP: providedDualStack})
			// Provided IPs keep only themselves of their type: IPv4,
			// IPv6, then the ExternalIP and the Hostname.
			r.waitNode("node-a", "initialized with both provided IPs", addressCount(4))
		},
	},
	{
		name: "node-init-provided-ipv6",
		run: func(r *run) {
			r.join(r.createInstance(api.InstanceCreate{Name: "node-a", IPv6: true}), nodeOptions{providedIP: providedIPv6})
			// A single-stack IPv6 node IP: the IPv4 InternalIP is dropped.
			r.waitNode("node-a", "initialized with the IPv6 only", addressCount(2))
		},
	},
	{
		name: "node-init-additional-labels",
		run: func(r *run) {
			inst := r.createInstance(api.InstanceCreate{Name: "node-a", Labels: map[string]string{
				"example.com/team":    "payments", // allowed
				"notk8s.io/v":         "kept",     // not a Kubernetes namespace: no dot before k8s.io
				"kubernetes.io/x":     "no",       // reserved namespaces, filtered
				"foo.kubernetes.io/y": "no",
				"k8s.io/z":            "no",
				"sub.k8s.io/w":        "no",
				"team":                "cloud", // the kubelet set it first: kept as the kubelet's
				"tier":                "web",   // the kubelet set the same value
			}})
			r.join(inst, nodeOptions{labels: map[string]string{"team": "kubelet", "tier": "web"}})
			r.waitNode("node-a", "initialized", initialized)
		},
	},
	{
		name: "node-init-kubelet-labels-kept",
		run: func(r *run) {
			inst := r.instance("node-a", false)
			r.join(inst, nodeOptions{labels: map[string]string{"team": "a", "node-role.kubernetes.io/worker": ""}})
			r.waitNode("node-a", "initialized", initialized)
		},
	},
	{
		name: "node-shutdown",
		run: func(r *run) {
			inst := r.instance("node-a", false)
			r.join(inst, nodeOptions{notReady: true})
			r.waitNode("node-a", "initialized", initialized)
			if _, err := r.cloud.Client.StopInstance(r.ctx, inst.ID); err != nil {
				r.t.Fatalf("stop instance: %v", err)
			}
			r.waitNode("node-a", "shutdown taint", hasTaint(cloudproviderapi.TaintNodeShutdown))
		},
	},
	{
		name:        "node-gone-deleted",
		events:      []string{"Node/node-a: Normal DeletingNode"},
		differences: []string{"node-deletion-guard"},
		// stratus confirms "gone" twice, 30s apart (the instance cache's
		// freshness), before it deletes.
		settle: 2 * time.Minute,
		run: func(r *run) {
			// Two nodes: stratus deletes nothing on an empty instance listing.
			insts := r.nodes("node-a", "node-b")
			if err := r.setReady("node-a", false); err != nil {
				r.t.Fatal(err)
			}
			if err := r.cloud.Client.DeleteInstance(r.ctx, insts["node-a"].ID); err != nil {
				r.t.Fatalf("delete instance: %v", err)
			}
			r.waitFor("node-a deleted", func(ctx context.Context) (bool, error) {
				_, err := r.kube.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		},
	},
	{
		name:        "node-init-cloud-errors",
		differences: []string{"node-events"},
		run: func(r *run) {
			inst := r.instance("node-a", false)
			base := r.failCloud("GET /v1/instances", "GET /v1/instances/{id}")
			r.join(inst, nodeOptions{})
			r.waitCloudErrors(base, 3)
			if n := r.node("node-a"); !hasTaint(cloudproviderapi.TaintExternalCloudProvider)(n) || n.Spec.ProviderID != "" {
				r.t.Fatalf("%s: node initialized while the cloud fails: taints %v, provider ID %q", r.side, n.Spec.Taints, n.Spec.ProviderID)
			}
			r.clearFaults()
			r.waitNode("node-a", "initialized after the cloud recovered", initialized)
		},
	},
	{
		name:        "node-notready-cloud-errors-kept",
		differences: []string{"node-events"},
		run: func(r *run) {
			r.nodes("node-a", "node-b")
			base := r.failCloud("GET /v1/instances", "GET /v1/instances/{id}")
			if err := r.setReady("node-a", false); err != nil {
				r.t.Fatal(err)
			}
			// The lifecycle controller checked the NotReady node and
			// failed: an error is not "the instance is gone".
			r.waitCloudErrors(base, 3)
			r.node("node-a")
			r.clearFaults()
		},
	},
	{
		name:        "lb-create-cloud-errors",
		differences: []string{"lb-ready-condition"},
		events:      []string{"Service/web: Warning SyncLoadBalancerFailed"},
		run: func(r *run) {
			r.nodes("node-a")
			base := r.failCloud("POST /v1/load-balancers")
			r.createService(lbService())
			r.waitCloudErrors(base, 1)
			if lbs, err := r.cloud.Client.ListLoadBalancers(r.ctx, listAll); err != nil || len(lbs) != 0 {
				r.t.Fatalf("%s: load balancers while their creation fails: %v, %v", r.side, lbs, err)
			}
			r.clearFaults()
			r.lbReady(svcName, 1, 80)
		},
	},
	{
		name:        "node-init-provided-ip-not-in-cloud",
		differences: []string{"node-events"},
		run: func(r *run) {
			// node-b joins with node-a: once it is initialized the manager
			// has had node-a in hand too.
			bad, good := r.instance("node-a", false), r.instance("node-b", false)
			r.join(bad, nodeOptions{providedIP: "10.255.255.254"})
			r.join(good, nodeOptions{})
			r.waitNode("node-b", "initialized", initialized)
			// Upstream behavior B3: a provided IP the cloud does not
			// report is an error and the node stays uninitialized.
			r.nodeStays("node-a", "uninitialized with a provided IP the cloud does not have", 2*time.Second, func(n *corev1.Node) bool {
				return hasTaint(cloudproviderapi.TaintExternalCloudProvider)(n) && n.Spec.ProviderID == ""
			})
			// The kubelet restarts with the right --node-ip.
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				n := r.node("node-a")
				n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = bad.PrivateIP
				_, err := r.kube.CoreV1().Nodes().Update(r.ctx, n, metav1.UpdateOptions{})
				return err
			}); err != nil {
				r.t.Fatalf("fix provided IP: %v", err)
			}
			r.waitNode("node-a", "initialized with the right provided IP", initialized)
		},
	},
	{
		name:        "lb-update-cloud-errors",
		differences: []string{"lb-ready-condition"},
		events:      []string{"Service/web: Warning SyncLoadBalancerFailed"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			base := r.failCloud("PUT /v1/load-balancers/{id}")
			r.updateService(svcName, func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: nodePort + 1})
			})
			r.waitCloudErrors(base, 1)
			lbs, err := r.cloud.Client.ListLoadBalancers(r.ctx, listAll)
			if err != nil || len(lbs) != 1 || len(lbs[0].Listeners) != 1 {
				r.t.Fatalf("%s: load balancer changed or lost while its update fails: %v, %v", r.side, lbs, err)
			}
			r.clearFaults()
			r.lbReady(svcName, 1, 80, 443)
		},
	},
	{
		name:   "lb-delete-cloud-errors",
		events: []string{"Service/web: Warning SyncLoadBalancerFailed", "Service/web: Normal DeletedLoadBalancer"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			base := r.failCloud("DELETE /v1/load-balancers/{id}")
			if err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Delete(r.ctx, svcName, metav1.DeleteOptions{}); err != nil {
				r.t.Fatal(err)
			}
			r.waitCloudErrors(base, 1)
			// The finalizer holds the Service until its load balancer is
			// really gone: nothing leaks.
			svc, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(r.ctx, svcName, metav1.GetOptions{})
			if err != nil || svc.DeletionTimestamp == nil || !slices.Contains(svc.Finalizers, "service.kubernetes.io/load-balancer-cleanup") {
				r.t.Fatalf("%s: service not held by its finalizer while its load balancer's deletion fails: %v, %v", r.side, svc, err)
			}
			if lbs, err := r.cloud.Client.ListLoadBalancers(r.ctx, listAll); err != nil || len(lbs) != 1 {
				r.t.Fatalf("%s: load balancers while their deletion fails: %v, %v", r.side, lbs, err)
			}
			r.clearFaults()
			r.noLoadBalancers()
			r.waitFor("service gone", func(ctx context.Context) (bool, error) {
				_, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, svcName, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		},
	},
	{
		name:        "lb-create",
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			r.nodes("node-a", "node-b")
			r.createService(lbService())
			r.lbReady(svcName, 2, 80)
		},
	},
	{
		name:        "lb-port-change",
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			r.updateService(svcName, func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: nodePort + 1})
			})
			r.lbReady(svcName, 1, 80, 443)
		},
	},
	{
		name:        "lb-etp-local",
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService(func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 30999
			}))
			r.lbReady(svcName, 1, 80)
		},
	},
	{
		name:        "lb-type-change",
		events:      []string{"Service/web: Normal DeletedLoadBalancer"},
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			r.updateService(svcName, func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeClusterIP
				for i := range s.Spec.Ports {
					s.Spec.Ports[i].NodePort = 0
				}
			})
			r.noLoadBalancers()
			r.waitService(svcName, "finalizer removed and status cleared", func(s *corev1.Service) bool {
				return len(s.Finalizers) == 0 && !hasIngress(s)
			})
		},
	},
	{
		name:   "lb-delete",
		events: []string{"Service/web: Normal DeletedLoadBalancer"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			if err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Delete(r.ctx, svcName, metav1.DeleteOptions{}); err != nil {
				r.t.Fatal(err)
			}
			r.noLoadBalancers()
			r.waitFor("service gone", func(ctx context.Context) (bool, error) {
				_, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, svcName, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		},
	},
	{
		name:        "lb-exclusion-label",
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			for name, value := range map[string]string{"node-true": "true", "node-empty": "", "node-false": "false"} {
				r.join(r.instance(name, false), nodeOptions{labels: map[string]string{corev1.LabelNodeExcludeBalancers: value}})
			}
			r.join(r.instance("node-plain", false), nodeOptions{})
			for _, n := range []string{"node-true", "node-empty", "node-false", "node-plain"} {
				r.waitNode(n, "initialized", initialized)
			}
			r.createService(lbService())
			// The label excludes a node unless its value parses as false
			// (upstream behavior B16): node-false and node-plain are backends.
			r.lbReady(svcName, 2, 80)
		},
	},
	{
		name:        "lb-node-joins",
		events:      []string{"Service/web: Normal UpdatedLoadBalancer"},
		differences: []string{"lb-ready-condition", "lb-backend-triggers", "lb-backends-initialized"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			r.nodes("node-b", "node-c")
			r.lbReady(svcName, 3, 80)
		},
	},
	{
		name:        "lb-recreate-new-uid",
		events:      []string{"Service/web: Normal DeletedLoadBalancer"},
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			r.nodes("node-a")
			old := r.createService(lbService())
			r.lbReady(svcName, 1, 80)
			// Delete and recreate at once: the old incarnation's load
			// balancer must go, the new one's come.
			if err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Delete(r.ctx, svcName, metav1.DeleteOptions{}); err != nil {
				r.t.Fatal(err)
			}
			r.waitFor("old service gone", func(ctx context.Context) (bool, error) {
				s, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, svcName, metav1.GetOptions{})
				return apierrors.IsNotFound(err) || (err == nil && s.UID != old.UID), nil
			})
			// The API server frees the old incarnation's node port a moment
			// after the object is gone: retry the create until it has.
			var created *corev1.Service
			r.waitFor("recreate service "+svcName, func(ctx context.Context) (bool, error) {
				svc, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, lbService(), metav1.CreateOptions{})
				if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "already allocated") {
					return false, nil
				}
				created = svc
				return err == nil, err
			})
			r.lbReady(svcName, 1, 80)
			r.waitCloud("only the new incarnation's load balancer", func(lbs []api.LoadBalancer, _ []api.Route) bool {
				return len(lbs) == 1 && slices.Contains(mapValues(lbs[0].Tags), string(created.UID))
			})
		},
	},
	{
		name:        "lb-mixed-protocols-source-ranges",
		differences: []string{"lb-ready-condition"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService(func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353), NodePort: nodePort + 2})
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "192.168.0.0/16"}
			}))
			r.lbReady(svcName, 1, 80, 53)
		},
	},
	{
		name:        "lb-unmapped-class-ignored",
		differences: []string{"lb-ready-condition", "lb-class"},
		run: func(r *run) {
			r.nodes("node-a")
			r.createService(lbService(func(s *corev1.Service) {
				s.Name = "classy"
				class := "example.com/other-lb"
				s.Spec.LoadBalancerClass = &class
				s.Spec.Ports[0].NodePort = nodePort + 3
			}))
			// A class-less Service created after it is served; by then
			// both managers have seen the classed one and left it alone.
			r.createService(lbService())
			r.lbReady(svcName, 1, 80)
		},
	},
	{
		name:        "routes",
		routes:      true,
		differences: []string{"route-event-driven"},
		run: func(r *run) {
			for i, name := range []string{"node-a", "node-b"} {
				r.join(r.instance(name, false), nodeOptions{podCIDR: fmt.Sprintf("10.244.%d.0/24", i)})
			}
			for _, n := range []string{"node-a", "node-b"} {
				r.waitNode(n, "initialized with route", func(n *corev1.Node) bool {
					return initialized(n) && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
						return c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionFalse
					})
				})
			}
			r.waitCloud("two routes", func(_ []api.LoadBalancer, routes []api.Route) bool { return len(routes) == 2 })
		},
	},
	{
		name:        "routes-cloud-errors",
		routes:      true,
		differences: []string{"route-event-driven", "route-retry"},
		events:      []string{"Node/node-a: Warning FailedToCreateRoute"},
		run: func(r *run) {
			base := r.failCloud("POST /v1/routes")
			r.join(r.instance("node-a", false), nodeOptions{podCIDR: "10.244.0.0/24"})
			r.waitCloudErrors(base, 1)
			r.waitNode("node-a", "network unavailable: no route", func(n *corev1.Node) bool {
				return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue && c.Reason == "NoRouteCreated"
				})
			})
			r.clearFaults()
			r.waitNode("node-a", "route created", func(n *corev1.Node) bool {
				return initialized(n) && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionFalse
				})
			})
			r.waitCloud("one route", func(_ []api.LoadBalancer, routes []api.Route) bool { return len(routes) == 1 })
		},
	},
}

// setReady writes the Node's Ready condition as its kubelet would.
func (r *run) setReady(name string, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := r.kube.CoreV1().Nodes().Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		now := metav1.Now()
		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				n.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}
			}
		}
		_, err = r.kube.CoreV1().Nodes().UpdateStatus(r.ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

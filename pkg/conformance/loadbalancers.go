package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// otherCluster is the cluster name of load balancers and routes that
// belong to someone else.
const otherCluster = "conformance-other"

// loadBalancerScenarios check LoadBalancer and stratus.LoadBalancerLister.
func loadBalancerScenarios() []Scenario {
	return slices.Concat(
		lbNameScenarios(),
		lbCreateScenarios(),
		lbBackendScenarios(),
		lbPortScenarios(),
		lbHealthCheckScenarios(),
		lbSourceRangeScenarios(),
		lbUnsupportedScenarios(),
		lbDeleteScenarios(),
		lbOtherClusterScenarios(),
		lbGoneBackendScenarios(),
		lbTrafficScenarios(),
		lbListerScenarios(),
		lbListerLeftOutScenarios(),
		lbDigestScenarios(),
	)
}

// What load balancer scenarios need.
var (
	needsLB       = []Need{NeedLoadBalancer}
	needsLBDriver = []Need{NeedLoadBalancer, NeedLoadBalancerDriver}
	needsLBLister = []Need{NeedLoadBalancer, NeedLoadBalancerLister}
)

// lbNameScenarios check the load balancer's name and a Service that has none.
func lbNameScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/name-stable", Needs: needsLB, Doc: "GetLoadBalancerName is the same for a Service, the Service with other ports, and one rebuilt from namespace, name and UID.",
			run: func(ctx context.Context, e *env) error {
				svc := e.service()
				want := e.lb.GetLoadBalancerName(ctx, e.cfg.ClusterName, svc)
				changed := svc.DeepCopy()
				changed.Spec.Ports[0].Port = 8443
				for what, s := range map[string]*v1.Service{"with other ports": changed, "rebuilt from its reference": rebuilt(svc)} {
					if got := e.lb.GetLoadBalancerName(ctx, e.cfg.ClusterName, s); got != want {
						return expected("GetLoadBalancerName of Service "+what, want, got)
					}
				}
				if want == "" {
					return expected("GetLoadBalancerName", "a name", `""`)
				}
				return nil
			}},
		{Name: "loadbalancers/absent-before-create", Needs: needsLB, Doc: "GetLoadBalancer reports exists=false for a Service that never had a load balancer.",
			run: func(ctx context.Context, e *env) error { return e.wantLB(ctx, e.cfg.ClusterName, e.service(), false) }},
	}
}

// lbCreateScenarios check EnsureLoadBalancer's create and its repetition.
func lbCreateScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/create", Needs: needsLB, Doc: "EnsureLoadBalancer creates a load balancer and returns an ingress, which GetLoadBalancer then reports.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 1)
				if err != nil {
					return err
				}
				svc := e.service()
				st, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes)
				if err != nil {
					return err
				}
				got, exists, err := e.lb.GetLoadBalancer(ctx, e.cfg.ClusterName, svc)
				if err != nil || !exists {
					return fmt.Errorf("GetLoadBalancer after create: expected exists=true, got exists=%v, error %v", exists, err)
				}
				if !sameIngress(st, got) {
					return expected("GetLoadBalancer's status after create", st.Ingress, got.Ingress)
				}
				return nil
			}},
		{Name: "loadbalancers/ensure-idempotent", Needs: needsLB, Doc: "A second EnsureLoadBalancer of an unchanged Service returns the same ingress and creates nothing more.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 1)
				if err != nil {
					return err
				}
				svc := e.service()
				first, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes)
				if err != nil {
					return err
				}
				second, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes)
				if err != nil {
					return err
				}
				if !sameIngress(first, second) {
					return expected("ingress of the second EnsureLoadBalancer", first.Ingress, second.Ingress)
				}
				if e.lbLister != nil {
					refs, err := e.lbLister.ListLoadBalancers(ctx, e.cfg.ClusterName)
					if err != nil {
						return fmt.Errorf("ListLoadBalancers: %w", err)
					}
					if n := len(refsOf(refs, svc)); n != 1 {
						return expected("listed load balancers of the Service after two ensures", 1, n)
					}
				}
				return nil
			}},
	}
}

// lbBackendScenarios check the backends Ensure and Update set.
func lbBackendScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/backends", Needs: needsLBDriver, Doc: "The load balancer's backends are the machines of the Nodes passed to EnsureLoadBalancer.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				svc := e.service()
				if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
					return err
				}
				return e.wantBackends(ctx, svc, nodes)
			}},
		{Name: "loadbalancers/update-backends", Needs: needsLBDriver, Doc: "UpdateLoadBalancer replaces the backends with the Nodes it is given, removing and adding.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				svc := e.service()
				if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes[:1]); err != nil {
					return err
				}
				for _, set := range [][]*v1.Node{nodes[1:], nodes} {
					if err := e.update(ctx, svc, set); err != nil {
						return fmt.Errorf("UpdateLoadBalancer with %d nodes: expected success, got %w", len(set), err)
					}
					if err := e.wantBackends(ctx, svc, set); err != nil {
						return err
					}
				}
				return nil
			}},
	}
}

// lbPortScenarios check changes of the Service's ports and protocols.
func lbPortScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/port-change", Needs: needsLBDriver, Doc: "EnsureLoadBalancer after the Service's port and NodePort changed moves the load balancer to the new ports.",
			run: portChange(func(svc *v1.Service) {
				svc.Spec.Ports[0].Port = 8080
				svc.Spec.Ports[0].NodePort = nodePort()
			})},
		{Name: "loadbalancers/protocol-change", Needs: needsLBDriver, Doc: "EnsureLoadBalancer after the Service's port changed from TCP to UDP serves UDP.",
			run: portChange(func(svc *v1.Service) { svc.Spec.Ports[0].Protocol = v1.ProtocolUDP })},
		{Name: "loadbalancers/port-added", Needs: needsLBDriver, Doc: "EnsureLoadBalancer after the Service gained a second port serves both.",
			run: portChange(func(svc *v1.Service) {
				svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: nodePort()})
			})},
	}
}

// lbHealthCheckScenarios check the load balancer's probe of its backends.
func lbHealthCheckScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/local-health-check", Needs: needsLBDriver, Doc: "With externalTrafficPolicy: Local the load balancer probes HTTP /healthz on the Service's healthCheckNodePort.",
			run: func(ctx context.Context, e *env) error {
				svc := e.service()
				svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				svc.Spec.HealthCheckNodePort = nodePort()
				d, err := e.described(ctx, svc)
				if err != nil {
					return err
				}
				hc := d.HealthCheck
				if hc == nil {
					return skip("the driver does not read health checks")
				}
				if !strings.EqualFold(hc.Protocol, "HTTP") || hc.Port != svc.Spec.HealthCheckNodePort || (hc.Path != "" && hc.Path != "/healthz") {
					return expected("health check", fmt.Sprintf("HTTP /healthz on port %d", svc.Spec.HealthCheckNodePort), fmt.Sprintf("%s %s on port %d", hc.Protocol, hc.Path, hc.Port))
				}
				return nil
			}},
		{Name: "loadbalancers/cluster-health-check", Needs: needsLBDriver, Doc: "With externalTrafficPolicy: Cluster the load balancer probes one of the Service's NodePorts.",
			run: func(ctx context.Context, e *env) error {
				svc := e.service()
				d, err := e.described(ctx, svc)
				if err != nil {
					return err
				}
				if d.HealthCheck == nil {
					return skip("the driver does not read health checks")
				}
				if d.HealthCheck.Port != 0 && d.HealthCheck.Port != svc.Spec.Ports[0].NodePort {
					return expected("health check port", svc.Spec.Ports[0].NodePort, d.HealthCheck.Port)
				}
				return nil
			}},
	}
}

// lbSourceRangeScenarios check the allowed client ranges.
func lbSourceRangeScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/source-ranges", Needs: needsLBDriver, Doc: "spec.loadBalancerSourceRanges become the load balancer's allowed client ranges.",
			run: sourceRanges(func(svc *v1.Service, r []string) { svc.Spec.LoadBalancerSourceRanges = r })},
		{Name: "loadbalancers/source-ranges-annotation", Needs: needsLBDriver, Doc: "The legacy service.beta.kubernetes.io/load-balancer-source-ranges annotation becomes the allowed client ranges.",
			run: sourceRanges(func(svc *v1.Service, r []string) {
				svc.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: strings.Join(r, ",")}
			})},
	}
}

// lbUnsupportedScenarios check the refusal of what the provider does not support.
func lbUnsupportedScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/unsupported-rejected", Needs: needsLBDriver, Doc: "Every setting the driver lists as unsupported makes EnsureLoadBalancer fail with an error naming the field, and creates nothing.",
			run: func(ctx context.Context, e *env) error {
				unsup := e.lbd.Unsupported()
				if len(unsup) == 0 {
					return skip("the driver lists no unsupported settings")
				}
				nodes, _, err := e.nodes(ctx, 1)
				if err != nil {
					return err
				}
				var errs []error
				for _, u := range unsup {
					svc := e.service()
					u.Apply(svc)
					if err := e.mirror(ctx, svc); err != nil {
						return err
					}
					e.deleteLater(e.cfg.ClusterName, svc)
					_, err := e.lb.EnsureLoadBalancer(ctx, e.cfg.ClusterName, svc, nodes)
					switch {
					case err == nil:
						errs = append(errs, expected("EnsureLoadBalancer with unsupported "+u.Field, "an error naming "+u.Field, "success"))
					case !strings.Contains(err.Error(), u.Field):
						errs = append(errs, expected("error of EnsureLoadBalancer with unsupported "+u.Field, "a message naming "+u.Field, err.Error()))
					default:
						if d, derr := e.lbd.DescribeLoadBalancer(ctx, e.lb.GetLoadBalancerName(ctx, e.cfg.ClusterName, svc)); derr != nil || d != nil {
							errs = append(errs, fmt.Errorf("after the rejection of %s: expected no load balancer, got %+v (error %v)", u.Field, d, derr))
						}
					}
				}
				return errors.Join(errs...)
			}},
	}
}

// lbDeleteScenarios check EnsureLoadBalancerDeleted.
func lbDeleteScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/delete", Needs: needsLB, Doc: "EnsureLoadBalancerDeleted removes the load balancer: GetLoadBalancer then reports exists=false.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.created(ctx)
				if err != nil {
					return err
				}
				if err := e.lb.EnsureLoadBalancerDeleted(ctx, e.cfg.ClusterName, svc); err != nil {
					return fmt.Errorf("EnsureLoadBalancerDeleted: expected success, got %w", err)
				}
				if err := e.eventually(ctx, func(ctx context.Context) error { return e.wantLB(ctx, e.cfg.ClusterName, svc, false) }); err != nil {
					return err
				}
				if e.lbd != nil {
					if d, err := e.lbd.DescribeLoadBalancer(ctx, e.lb.GetLoadBalancerName(ctx, e.cfg.ClusterName, svc)); err != nil || d != nil {
						return fmt.Errorf("the cloud after EnsureLoadBalancerDeleted: expected no load balancer, got %+v (error %v)", d, err)
					}
				}
				return nil
			}},
		{Name: "loadbalancers/delete-already-gone", Needs: needsLB, Doc: "EnsureLoadBalancerDeleted succeeds for a load balancer already deleted and for one never created.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.created(ctx)
				if err != nil {
					return err
				}
				for i, s := range []*v1.Service{svc, svc, e.service()} {
					if err := e.lb.EnsureLoadBalancerDeleted(ctx, e.cfg.ClusterName, s); err != nil {
						return fmt.Errorf("EnsureLoadBalancerDeleted call %d (%s): expected success, got %w", i+1, []string{"present", "already deleted", "never created"}[i], err)
					}
				}
				return nil
			}},
		{Name: "loadbalancers/delete-rebuilt-service", Needs: needsLB, Doc: "EnsureLoadBalancerDeleted with a Service rebuilt from namespace, name and UID (orphan cleanup) removes the load balancer.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.created(ctx)
				if err != nil {
					return err
				}
				if err := e.lb.EnsureLoadBalancerDeleted(ctx, e.cfg.ClusterName, rebuilt(svc)); err != nil {
					return fmt.Errorf("EnsureLoadBalancerDeleted of a rebuilt Service: expected success, got %w", err)
				}
				return e.eventually(ctx, func(ctx context.Context) error { return e.wantLB(ctx, e.cfg.ClusterName, svc, false) })
			}},
	}
}

// lbOtherClusterScenarios check that another cluster's load balancers are left alone.
func lbOtherClusterScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/other-cluster-not-reported", Needs: needsLB, Doc: "GetLoadBalancer never reports exists=true for a load balancer another cluster created for a Service with the same UID.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.createdFor(ctx, otherCluster)
				if err != nil {
					return err
				}
				// An error is fine (the name is taken by someone else);
				// exists=true would make this cluster adopt it.
				if _, exists, err := e.lb.GetLoadBalancer(ctx, e.cfg.ClusterName, svc); err == nil && exists {
					return expected("GetLoadBalancer in cluster "+e.cfg.ClusterName+" of cluster "+otherCluster+"'s load balancer", "exists=false or an error", "exists=true")
				}
				return nil
			}},
		{Name: "loadbalancers/other-cluster-not-deleted", Needs: needsLB, Doc: "EnsureLoadBalancerDeleted leaves another cluster's load balancer for a Service with the same UID in place.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.createdFor(ctx, otherCluster)
				if err != nil {
					return err
				}
				// Success (nothing of ours to delete) or an error are both
				// fine; deleting the other cluster's is not.
				_ = e.lb.EnsureLoadBalancerDeleted(ctx, e.cfg.ClusterName, svc)
				return e.wantLB(ctx, otherCluster, svc, true)
			}},
	}
}

// lbGoneBackendScenarios check Nodes whose machine was just deleted.
func lbGoneBackendScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/gone-backend-ensure", Needs: needsLB, Doc: "EnsureLoadBalancer with a Node whose machine was just deleted succeeds and serves the remaining Nodes.",
			run: goneBackend(false)},
		{Name: "loadbalancers/gone-backend-update", Needs: needsLB, Doc: "UpdateLoadBalancer with a Node whose machine was just deleted succeeds and serves the remaining Nodes.",
			run: goneBackend(true)},
	}
}

// lbTrafficScenarios check traffic through the load balancer.
func lbTrafficScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancers/traffic", Needs: []Need{NeedLoadBalancer, NeedTraffic}, Doc: "Traffic through the ingress reaches every backend Node, and after UpdateLoadBalancer only the remaining one.",
			run: func(ctx context.Context, e *env) error {
				nodes, machines, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				svc := e.service()
				stop, err := e.traffic.ServeNodePort(ctx, machines, svc.Spec.Ports[0].NodePort)
				if err != nil {
					return fmt.Errorf("driver: serve NodePort: %w", err)
				}
				defer stop()
				st, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes)
				if err != nil {
					return err
				}
				if err := e.reaches(ctx, st, svc.Spec.Ports[0].Port, nodes); err != nil {
					return err
				}
				if err := e.update(ctx, svc, nodes[:1]); err != nil {
					return fmt.Errorf("UpdateLoadBalancer: %w", err)
				}
				return e.reaches(ctx, st, svc.Spec.Ports[0].Port, nodes[:1])
			}},
	}
}

// lbListerScenarios check what stratus.LoadBalancerLister lists of this cluster.
func lbListerScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancerlister/lists-own", Needs: needsLBLister, Doc: "ListLoadBalancers lists a created load balancer by its name and its Service's namespace, name and UID.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.created(ctx)
				if err != nil {
					return err
				}
				_, err = e.listedRef(ctx, svc)
				return err
			}},
		{Name: "loadbalancerlister/status-matches", Needs: needsLBLister, Doc: "A listed Status (when the listing has one) is what GetLoadBalancer reports.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.created(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					ref, err := e.listedRef(ctx, svc)
					if err != nil {
						return err
					}
					if ref.Status == nil {
						if ref.Provisioning {
							return errors.New("the load balancer is still listed as provisioning")
						}
						return nil
					}
					st, _, err := e.lb.GetLoadBalancer(ctx, e.cfg.ClusterName, svc)
					if err != nil {
						return fmt.Errorf("GetLoadBalancer: %w", err)
					}
					if !sameIngress(st, ref.Status) {
						return expected("listed Status", st.Ingress, ref.Status.Ingress)
					}
					return nil
				})
			}},
	}
}

// lbDigestScenarios check stratus.BackendsDigester against the listing.
func lbDigestScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancerlister/backends-digest", Needs: []Need{NeedLoadBalancer, NeedLoadBalancerLister, NeedBackendsDigester},
			Doc: "BackendsDigest for a Service and its nodes is the Backends its listing carries once the load balancer serves them, before and after an update to other nodes; it differs for other nodes unless backend pools hold them.",
			run: func(ctx context.Context, e *env) error {
				if e.pools != nil {
					// Pooled load balancers are sent as stratus sends them.
					ctx = stratus.WithBackendPoolsManaged(ctx)
				}
				nodes, _, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				svc := e.service()
				if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
					return err
				}
				both, err := e.listedDigest(ctx, svc, nodes)
				if err != nil {
					return err
				}
				if err := e.update(ctx, svc, nodes[:1]); err != nil {
					return fmt.Errorf("UpdateLoadBalancer: %w", err)
				}
				one, err := e.listedDigest(ctx, svc, nodes[:1])
				if err != nil {
					return err
				}
				if e.pools == nil && one == both {
					return expected("BackendsDigest of one node", "another digest than of two nodes", one)
				}
				return nil
			}},
	}
}

// listedDigest waits until svc's listed Backends is BackendsDigest of
// nodes, and returns it.
func (e *env) listedDigest(ctx context.Context, svc *v1.Service, nodes []*v1.Node) (string, error) {
	want, ok := e.digester.BackendsDigest(ctx, e.cfg.ClusterName, svc, nodes)
	if !ok || want == "" {
		// stratus then sends every update, as without the extension.
		return "", skip("BackendsDigest cannot tell for %d nodes with provider IDs (answered %q, %v): not in use", len(nodes), want, ok)
	}
	err := e.eventually(ctx, func(ctx context.Context) error {
		ref, err := e.listedRef(ctx, svc)
		if err != nil {
			return err
		}
		if ref.Backends != want {
			return expected("listed Backends", want, ref.Backends)
		}
		return nil
	})
	return want, err
}

// lbListerLeftOutScenarios check what stratus.LoadBalancerLister leaves out.
func lbListerLeftOutScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancerlister/other-cluster-not-listed", Needs: needsLBLister, Doc: "ListLoadBalancers never lists another cluster's load balancers.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.createdFor(ctx, otherCluster)
				if err != nil {
					return err
				}
				refs, err := e.lbLister.ListLoadBalancers(ctx, e.cfg.ClusterName)
				if err != nil {
					return fmt.Errorf("ListLoadBalancers: %w", err)
				}
				if got := refsOf(refs, svc); len(got) > 0 {
					return expected("this cluster's listing", "no load balancer of cluster "+otherCluster, fmt.Sprintf("%+v", got))
				}
				return nil
			}},
		{Name: "loadbalancerlister/deleted-not-listed", Needs: needsLBLister, Doc: "A deleted load balancer is no longer listed.",
			run: func(ctx context.Context, e *env) error {
				svc, err := e.created(ctx)
				if err != nil {
					return err
				}
				if err := e.lb.EnsureLoadBalancerDeleted(ctx, e.cfg.ClusterName, svc); err != nil {
					return fmt.Errorf("EnsureLoadBalancerDeleted: %w", err)
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					refs, err := e.lbLister.ListLoadBalancers(ctx, e.cfg.ClusterName)
					if err != nil {
						return fmt.Errorf("ListLoadBalancers: %w", err)
					}
					if got := refsOf(refs, svc); len(got) > 0 {
						return expected("listing after delete", "no entry", fmt.Sprintf("%+v", got))
					}
					return nil
				})
			}},
	}
}

// nodePort picks a NodePort from the default range.
func nodePort() int32 { return int32(30000 + rand.IntN(2768)) }

// service returns a new LoadBalancer Service with one TCP port (80) and a
// random UID, in the run's namespace. The load balancer calls get it from
// memory, as stratus passes a Service; ensure also keeps a copy in the API
// (mirror).
func (e *env) service() *v1.Service {
	svc := &v1.Service{Spec: v1.ServiceSpec{
		Type:                  v1.ServiceTypeLoadBalancer,
		Ports:                 []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: nodePort()}},
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
	}}
	svc.Namespace, svc.Name, svc.UID = e.namespaceName(), e.name(), uuid.NewUUID()
	return svc
}

// mirror keeps a Service of svc's namespace and name in the API until the
// scenario ends: a provider may read or annotate the Service object (the
// upstream OpenStack provider records its load balancer's ID on it). It is
// of type ClusterIP, so that no controller acts on it and no NodePort is
// allocated; only its name matters.
func (e *env) mirror(ctx context.Context, svc *v1.Service) error {
	if _, err := e.namespace(ctx); err != nil {
		return err
	}
	m := &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}}}
	m.Namespace, m.Name = svc.Namespace, svc.Name
	_, err := e.kube.CoreV1().Services(svc.Namespace).Create(ctx, m, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("create Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	e.later(func(ctx context.Context) error {
		if err := e.kube.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return nil
	})
	return nil
}

// rebuilt is svc as stratus rebuilds it from a stratus.LoadBalancerRef.
func rebuilt(svc *v1.Service) *v1.Service {
	r := &v1.Service{}
	r.Namespace, r.Name, r.UID = svc.Namespace, svc.Name, svc.UID
	return r
}

// nodes creates n machines and returns their initialized Nodes.
func (e *env) nodes(ctx context.Context, n int) ([]*v1.Node, []*Machine, error) {
	var nodes []*v1.Node
	var ms []*Machine
	for range n {
		m, err := e.machine(ctx)
		if err != nil {
			return nil, nil, err
		}
		nodes, ms = append(nodes, initialized(m)), append(ms, m)
	}
	return nodes, ms, nil
}

// deleteLater deletes svc's load balancer of cluster after the scenario.
func (e *env) deleteLater(cluster string, svc *v1.Service) {
	e.later(func(ctx context.Context) error {
		if err := e.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
			return fmt.Errorf("delete the load balancer of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return nil
	})
}

// ensure calls EnsureLoadBalancer until it stops answering RetryError,
// and checks that the status has an ingress.
func (e *env) ensure(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if err := e.mirror(ctx, svc); err != nil {
		return nil, err
	}
	e.deleteLater(cluster, svc)
	var st *v1.LoadBalancerStatus
	var final error
	err := e.eventually(ctx, func(ctx context.Context) error {
		var err error
		st, err = e.lb.EnsureLoadBalancer(ctx, cluster, svc, nodes)
		var retry *cloudproviderapi.RetryError
		if errors.As(err, &retry) {
			return err
		}
		final = err
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("EnsureLoadBalancer of Service %s: expected a status, got %w", svc.Name, err)
	}
	if final != nil {
		return nil, fmt.Errorf("EnsureLoadBalancer of Service %s: expected a status, got error %w", svc.Name, final)
	}
	if st == nil || len(st.Ingress) == 0 || (st.Ingress[0].IP == "" && st.Ingress[0].Hostname == "") {
		return nil, expected("EnsureLoadBalancer's status of Service "+svc.Name, "an ingress IP or hostname", st)
	}
	return st, nil
}

// update calls UpdateLoadBalancer until it stops answering RetryError:
// a provider that never blocks may answer it while the cloud applies the
// change, and stratus then converges the load balancer with an ensure.
func (e *env) update(ctx context.Context, svc *v1.Service, nodes []*v1.Node) error {
	var final error
	err := e.eventually(ctx, func(ctx context.Context) error {
		err := e.lb.UpdateLoadBalancer(ctx, e.cfg.ClusterName, svc, nodes)
		var retry *cloudproviderapi.RetryError
		if errors.As(err, &retry) {
			return err
		}
		final = err
		return nil
	})
	if err != nil {
		return err
	}
	return final
}

// created ensures a load balancer of a new Service on one new machine.
func (e *env) created(ctx context.Context) (*v1.Service, error) {
	return e.createdFor(ctx, e.cfg.ClusterName)
}

// createdFor is created for cluster.
func (e *env) createdFor(ctx context.Context, cluster string) (*v1.Service, error) {
	nodes, _, err := e.nodes(ctx, 1)
	if err != nil {
		return nil, err
	}
	svc := e.service()
	_, err = e.ensure(ctx, cluster, svc, nodes)
	return svc, err
}

// wantLB checks GetLoadBalancer's exists for svc in cluster.
func (e *env) wantLB(ctx context.Context, cluster string, svc *v1.Service, want bool) error {
	_, exists, err := e.lb.GetLoadBalancer(ctx, cluster, svc)
	if err != nil {
		return fmt.Errorf("GetLoadBalancer of Service %s in cluster %s: expected exists=%v, got error %w", svc.Name, cluster, want, err)
	}
	if exists != want {
		return expected("GetLoadBalancer's exists of Service "+svc.Name+" in cluster "+cluster, want, exists)
	}
	return nil
}

// described ensures svc's load balancer on one machine and reads it.
func (e *env) described(ctx context.Context, svc *v1.Service) (*LoadBalancer, error) {
	nodes, _, err := e.nodes(ctx, 1)
	if err != nil {
		return nil, err
	}
	if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
		return nil, err
	}
	return e.describe(ctx, svc)
}

func (e *env) describe(ctx context.Context, svc *v1.Service) (*LoadBalancer, error) {
	return e.describeIn(ctx, e.cfg.ClusterName, svc)
}

// describeIn reads cluster's load balancer of svc through the driver.
func (e *env) describeIn(ctx context.Context, cluster string, svc *v1.Service) (*LoadBalancer, error) {
	name := e.lb.GetLoadBalancerName(ctx, cluster, svc)
	d, err := e.lbd.DescribeLoadBalancer(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("driver: describe load balancer %s: %w", name, err)
	}
	if d == nil {
		return nil, expected("load balancer "+name+" in the cloud", "present", "absent")
	}
	return d, nil
}

// wantBackends waits until svc's load balancer has exactly nodes as
// backends.
func (e *env) wantBackends(ctx context.Context, svc *v1.Service, nodes []*v1.Node) error {
	return e.wantBackendsIn(ctx, e.cfg.ClusterName, svc, nodes)
}

// wantBackendsIn is wantBackends for cluster's load balancer.
func (e *env) wantBackendsIn(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	var want []string
	for _, n := range nodes {
		want = append(want, n.Name)
	}
	slices.Sort(want)
	return e.eventually(ctx, func(ctx context.Context) error {
		d, err := e.describeIn(ctx, cluster, svc)
		if err != nil {
			return err
		}
		if d.Backends == nil {
			return skip("the driver does not read backends")
		}
		got := slices.Sorted(slices.Values(d.Backends))
		if !slices.Equal(got, want) {
			return expected("backends", want, got)
		}
		return nil
	})
}

// portChange ensures a Service, changes it with change, ensures again and
// checks the cloud's ports.
func portChange(change func(*v1.Service)) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		nodes, _, err := e.nodes(ctx, 1)
		if err != nil {
			return err
		}
		svc := e.service()
		if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
			return err
		}
		change(svc)
		if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
			return err
		}
		var want []Port
		for _, p := range svc.Spec.Ports {
			want = append(want, Port{Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort})
		}
		return e.eventually(ctx, func(ctx context.Context) error {
			d, err := e.describe(ctx, svc)
			if err != nil {
				return err
			}
			if d.Ports == nil {
				return skip("the driver does not read ports")
			}
			if !slices.Equal(sortedPorts(d.Ports), sortedPorts(want)) {
				return expected("ports", want, d.Ports)
			}
			return nil
		})
	}
}

func sortedPorts(p []Port) []Port {
	return slices.SortedFunc(slices.Values(p), func(a, b Port) int { return int(a.Port - b.Port) })
}

// sourceRanges sets source ranges with set and checks the cloud's.
func sourceRanges(set func(*v1.Service, []string)) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		want := []string{"198.51.100.7/32", "203.0.113.0/24"}
		svc := e.service()
		set(svc, want)
		d, err := e.described(ctx, svc)
		if err != nil {
			return err
		}
		if d.SourceRanges == nil {
			return skip("the driver does not read source ranges")
		}
		if got := slices.Sorted(slices.Values(d.SourceRanges)); !slices.Equal(got, want) {
			return expected("source ranges", want, got)
		}
		return nil
	}
}

// goneBackend passes a Node whose machine was deleted to
// EnsureLoadBalancer (or, after a create, to UpdateLoadBalancer).
func goneBackend(update bool) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		nodes, machines, err := e.nodes(ctx, 2)
		if err != nil {
			return err
		}
		svc := e.service()
		if update {
			if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes[:1]); err != nil {
				return err
			}
		}
		if err := e.cfg.Driver.DeleteMachine(ctx, machines[1]); err != nil {
			return fmt.Errorf("driver: delete machine %s: %w", machines[1].Node.Name, err)
		}
		if update {
			if err := e.update(ctx, svc, nodes); err != nil {
				return fmt.Errorf("UpdateLoadBalancer with a Node whose machine is gone: expected success, got %w", err)
			}
		} else if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
			return fmt.Errorf("with a Node whose machine is gone: %w", err)
		}
		if e.lbd == nil {
			return nil
		}
		return e.wantBackends(ctx, svc, nodes[:1])
	}
}

// reaches waits until connections through the ingress reach exactly nodes.
func (e *env) reaches(ctx context.Context, st *v1.LoadBalancerStatus, port int32, nodes []*v1.Node) error {
	var want []string
	for _, n := range nodes {
		want = append(want, n.Name)
	}
	slices.Sort(want)
	return e.eventually(ctx, func(ctx context.Context) error {
		seen := map[string]bool{}
		for range 4 * len(nodes) {
			name, err := e.traffic.Reach(ctx, st.Ingress[0], port)
			if err != nil {
				return fmt.Errorf("traffic through %v port %d: %w", st.Ingress[0], port, err)
			}
			seen[name] = true
		}
		var got []string
		for n := range seen {
			got = append(got, n)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return expected("nodes reached through the load balancer", want, got)
		}
		return nil
	})
}

// listedRef returns svc's entry in this cluster's listing.
func (e *env) listedRef(ctx context.Context, svc *v1.Service) (*stratus.LoadBalancerRef, error) {
	refs, err := e.lbLister.ListLoadBalancers(ctx, e.cfg.ClusterName)
	if err != nil {
		return nil, fmt.Errorf("ListLoadBalancers: %w", err)
	}
	got := refsOf(refs, svc)
	if len(got) != 1 {
		return nil, expected("listed load balancers of Service "+svc.Name, 1, len(got))
	}
	if want := e.lb.GetLoadBalancerName(ctx, e.cfg.ClusterName, svc); got[0].Name != want || got[0].ServiceNamespace != svc.Namespace || got[0].ServiceName != svc.Name {
		return nil, expected("listed reference", fmt.Sprintf("name %s, Service %s/%s", want, svc.Namespace, svc.Name),
			fmt.Sprintf("name %s, Service %s/%s", got[0].Name, got[0].ServiceNamespace, got[0].ServiceName))
	}
	return &got[0], nil
}

// refsOf returns the references to svc's UID.
func refsOf(refs []stratus.LoadBalancerRef, svc *v1.Service) []stratus.LoadBalancerRef {
	var out []stratus.LoadBalancerRef
	for _, r := range refs {
		if r.ServiceUID == svc.UID || (r.ServiceUID == types.UID("") && r.ServiceName == svc.Name && r.ServiceNamespace == svc.Namespace) {
			out = append(out, r)
		}
	}
	return out
}

// sameIngress compares the ingress addresses of two statuses.
func sameIngress(a, b *v1.LoadBalancerStatus) bool {
	if a == nil || b == nil || len(a.Ingress) != len(b.Ingress) {
		return false
	}
	for i := range a.Ingress {
		if a.Ingress[i].IP != b.Ingress[i].IP || a.Ingress[i].Hostname != b.Ingress[i].Hostname {
			return false
		}
	}
	return true
}

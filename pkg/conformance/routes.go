package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// routeScenarios check Routes.
func routeScenarios() []Scenario {
	return slices.Concat(
		routeCreateScenarios(),
		routeDeleteScenarios(),
		routeDualStackScenarios(),
		routeBlackholeScenarios(),
		routeOtherClusterScenarios(),
	)
}

// What route scenarios need.
var (
	needsRoutes = []Need{NeedRoutes}
)

// routeCreateScenarios check CreateRoute.
func routeCreateScenarios() []Scenario {
	return []Scenario{
		{Name: "routes/create", Needs: needsRoutes, Doc: "CreateRoute programs a route that ListRoutes reports with the node name as TargetNode.",
			run: func(ctx context.Context, e *env) error {
				n, err := e.routedNode(ctx)
				if err != nil {
					return err
				}
				cidr := e.podCIDR()
				if err := e.createRoute(ctx, e.cfg.ClusterName, n, cidr); err != nil {
					return err
				}
				_, err = e.wantRoute(ctx, n.Name, cidr)
				return err
			}},
		{Name: "routes/create-repeated", Needs: needsRoutes, Doc: "A repeated CreateRoute of the same route succeeds and leaves one route.",
			run: func(ctx context.Context, e *env) error {
				n, err := e.routedNode(ctx)
				if err != nil {
					return err
				}
				cidr := e.podCIDR()
				for range 2 {
					if err := e.createRoute(ctx, e.cfg.ClusterName, n, cidr); err != nil {
						return err
					}
				}
				if _, err := e.wantRoute(ctx, n.Name, cidr); err != nil {
					return err
				}
				all, err := e.routes.ListRoutes(ctx, e.cfg.ClusterName)
				if err != nil {
					return fmt.Errorf("ListRoutes: %w", err)
				}
				if got := countRoutes(all, cidr); got != 1 {
					return expected("routes of "+cidr+" after two creates", 1, got)
				}
				return nil
			}},
	}
}

// routeDeleteScenarios check DeleteRoute.
func routeDeleteScenarios() []Scenario {
	return []Scenario{
		{Name: "routes/delete", Needs: needsRoutes, Doc: "DeleteRoute of a listed route removes it from ListRoutes.",
			run: func(ctx context.Context, e *env) error {
				rt, err := e.programmed(ctx)
				if err != nil {
					return err
				}
				if err := e.routes.DeleteRoute(ctx, e.cfg.ClusterName, rt); err != nil {
					return fmt.Errorf("DeleteRoute %s: expected success, got %w", rt.DestinationCIDR, err)
				}
				return e.wantNoRoute(ctx, rt.DestinationCIDR)
			}},
		{Name: "routes/delete-already-gone", Needs: needsRoutes, Doc: "DeleteRoute of a route already deleted succeeds.",
			run: func(ctx context.Context, e *env) error {
				rt, err := e.programmed(ctx)
				if err != nil {
					return err
				}
				for i := range 2 {
					if err := e.routes.DeleteRoute(ctx, e.cfg.ClusterName, rt); err != nil {
						return fmt.Errorf("DeleteRoute %s, call %d: expected success, got %w", rt.DestinationCIDR, i+1, err)
					}
					if err := e.wantNoRoute(ctx, rt.DestinationCIDR); err != nil {
						return err
					}
				}
				return nil
			}},
	}
}

// routeDualStackScenarios check a node's IPv4 and IPv6 routes.
func routeDualStackScenarios() []Scenario {
	return []Scenario{
		{Name: "routes/dual-stack", Needs: []Need{NeedRoutes, NeedDualStack}, Doc: "An IPv4 and an IPv6 route of one node, created with the same name hint, are both listed.",
			run: func(ctx context.Context, e *env) error {
				n, err := e.routedNode(ctx)
				if err != nil {
					return err
				}
				cidrs := []string{e.podCIDR(), fmt.Sprintf("fd%02x:%x::/64", rand.IntN(256), rand.IntN(1<<16))}
				for _, c := range cidrs {
					if err := e.createRoute(ctx, e.cfg.ClusterName, n, c); err != nil {
						return err
					}
				}
				for _, c := range cidrs {
					if _, err := e.wantRoute(ctx, n.Name, c); err != nil {
						return err
					}
				}
				return nil
			}},
	}
}

// routeBlackholeScenarios check routes whose next hop is gone.
func routeBlackholeScenarios() []Scenario {
	return []Scenario{
		{Name: "routes/blackhole", Needs: needsRoutes, Doc: "A route whose machine was deleted is listed as a blackhole, and DeleteRoute removes it.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				n, err := e.register(ctx, initialized(m))
				if err != nil {
					return err
				}
				cidr := e.podCIDR()
				if err := e.createRoute(ctx, e.cfg.ClusterName, n, cidr); err != nil {
					return err
				}
				if _, err := e.wantRoute(ctx, n.Name, cidr); err != nil {
					return err
				}
				if err := e.cfg.Driver.DeleteMachine(ctx, m); err != nil {
					return fmt.Errorf("driver: delete machine %s: %w", m.Node.Name, err)
				}
				var rt *cloudprovider.Route
				if err := e.eventually(ctx, func(ctx context.Context) error {
					all, err := e.routes.ListRoutes(ctx, e.cfg.ClusterName)
					if err != nil {
						return fmt.Errorf("ListRoutes: %w", err)
					}
					i := slices.IndexFunc(all, func(r *cloudprovider.Route) bool { return r.DestinationCIDR == cidr })
					if i < 0 || !all[i].Blackhole {
						return expected("route "+cidr+" after its machine was deleted", "listed with Blackhole", routeString(all, i))
					}
					rt = all[i]
					return nil
				}); err != nil {
					return err
				}
				if err := e.routes.DeleteRoute(ctx, e.cfg.ClusterName, rt); err != nil {
					return fmt.Errorf("DeleteRoute of blackhole %s: expected success, got %w", cidr, err)
				}
				return e.wantNoRoute(ctx, cidr)
			}},
	}
}

// routeOtherClusterScenarios check that another cluster's routes are left out.
func routeOtherClusterScenarios() []Scenario {
	return []Scenario{
		{Name: "routes/other-cluster-not-listed", Needs: needsRoutes, Doc: "ListRoutes never lists another cluster's routes.",
			run: func(ctx context.Context, e *env) error {
				n, err := e.routedNode(ctx)
				if err != nil {
					return err
				}
				cidr := e.podCIDR()
				if err := e.createRoute(ctx, otherCluster, n, cidr); err != nil {
					return err
				}
				all, err := e.routes.ListRoutes(ctx, e.cfg.ClusterName)
				if err != nil {
					return fmt.Errorf("ListRoutes: %w", err)
				}
				if countRoutes(all, cidr) > 0 {
					return expected("this cluster's routes", "no route of cluster "+otherCluster, routeString(all, slices.IndexFunc(all, func(r *cloudprovider.Route) bool { return r.DestinationCIDR == cidr })))
				}
				return nil
			}},
	}
}

// podCIDR returns a fresh IPv4 pod CIDR.
func (e *env) podCIDR() string {
	return fmt.Sprintf("10.%d.%d.0/24", 128+rand.IntN(64), rand.IntN(256))
}

// routedNode creates a machine and registers its initialized Node.
func (e *env) routedNode(ctx context.Context) (*v1.Node, error) {
	m, err := e.machine(ctx)
	if err != nil {
		return nil, err
	}
	return e.register(ctx, initialized(m))
}

// register creates node in the API server (providers read Nodes there,
// e.g. for their provider IDs), deleted after the scenario.
func (e *env) register(ctx context.Context, node *v1.Node) (*v1.Node, error) {
	out, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Node %s: %w", node.Name, err)
	}
	e.later(func(ctx context.Context) error {
		if err := e.kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Node %s: %w", node.Name, err)
		}
		return nil
	})
	return out, nil
}

// createRoute routes cidr to node in cluster, deleting it after the
// scenario.
func (e *env) createRoute(ctx context.Context, cluster string, node *v1.Node, cidr string) error {
	rt := &cloudprovider.Route{TargetNode: types.NodeName(node.Name), DestinationCIDR: cidr}
	if err := e.routes.CreateRoute(ctx, cluster, string(node.UID), rt); err != nil {
		return fmt.Errorf("CreateRoute %s to node %s: expected success, got %w", cidr, node.Name, err)
	}
	e.later(func(ctx context.Context) error {
		all, err := e.routes.ListRoutes(ctx, cluster)
		if err != nil {
			return fmt.Errorf("list routes of cluster %s: %w", cluster, err)
		}
		for _, r := range all {
			if r.DestinationCIDR == cidr {
				if err := e.routes.DeleteRoute(ctx, cluster, r); err != nil {
					return fmt.Errorf("delete route %s: %w", cidr, err)
				}
			}
		}
		return nil
	})
	return nil
}

// programmed creates a node with a route and returns the listed route.
func (e *env) programmed(ctx context.Context) (*cloudprovider.Route, error) {
	n, err := e.routedNode(ctx)
	if err != nil {
		return nil, err
	}
	cidr := e.podCIDR()
	if err := e.createRoute(ctx, e.cfg.ClusterName, n, cidr); err != nil {
		return nil, err
	}
	return e.wantRoute(ctx, n.Name, cidr)
}

// wantRoute waits until ListRoutes has cidr to node.
func (e *env) wantRoute(ctx context.Context, node, cidr string) (*cloudprovider.Route, error) {
	var rt *cloudprovider.Route
	err := e.eventually(ctx, func(ctx context.Context) error {
		all, err := e.routes.ListRoutes(ctx, e.cfg.ClusterName)
		if err != nil {
			return fmt.Errorf("ListRoutes: %w", err)
		}
		i := slices.IndexFunc(all, func(r *cloudprovider.Route) bool { return r.DestinationCIDR == cidr })
		if i < 0 || string(all[i].TargetNode) != node || all[i].Blackhole {
			return expected("listed route "+cidr, "target node "+node+", not a blackhole", routeString(all, i))
		}
		rt = all[i]
		return nil
	})
	return rt, err
}

// wantNoRoute waits until ListRoutes lacks cidr.
func (e *env) wantNoRoute(ctx context.Context, cidr string) error {
	return e.eventually(ctx, func(ctx context.Context) error {
		all, err := e.routes.ListRoutes(ctx, e.cfg.ClusterName)
		if err != nil {
			return fmt.Errorf("ListRoutes: %w", err)
		}
		if i := slices.IndexFunc(all, func(r *cloudprovider.Route) bool { return r.DestinationCIDR == cidr }); i >= 0 {
			return expected("routes after deleting "+cidr, "no such route", routeString(all, i))
		}
		return nil
	})
}

func countRoutes(all []*cloudprovider.Route, cidr string) int {
	n := 0
	for _, r := range all {
		if r.DestinationCIDR == cidr {
			n++
		}
	}
	return n
}

func routeString(all []*cloudprovider.Route, i int) string {
	if i < 0 {
		return "no route"
	}
	r := all[i]
	return fmt.Sprintf("route %s to %q (blackhole %v)", r.DestinationCIDR, r.TargetNode, r.Blackhole)
}

package bench

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stratus-ccm/stratus/minicloud/client"
)

// createServices creates count LoadBalancer Services named prefix-<i>.
func (e *env) createServices(ctx context.Context, prefix string, count int) error {
	return e.createServicesFrom(ctx, prefix, 0, count)
}

// createServicesFrom creates count LoadBalancer Services named prefix-<i>,
// i from from.
func (e *env) createServicesFrom(ctx context.Context, prefix string, from, count int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := from; i < from+count; i++ {
		g.Go(func() error {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: metav1.NamespaceDefault},
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeLoadBalancer,
					Selector: map[string]string{"app": prefix},
					Ports:    []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
				},
			}
			if _, err := e.kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create service %s: %w", svc.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// waitIngress waits until want Services have ingress.
func (e *env) waitIngress(ctx context.Context, want int) error {
	return e.until(ctx, fmt.Sprintf("%d services with ingress", want), func(ctx context.Context) (bool, error) {
		n, err := e.servicesWithIngress(ctx)
		return err == nil && n >= want, nil
	})
}

// servicesWithIngress counts the Services that have ingress.
func (e *env) servicesWithIngress(ctx context.Context) (int, error) {
	svcs, err := e.kube.CoreV1().Services(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("list services: %w", err)
	}
	n := 0
	for _, s := range svcs.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			n++
		}
	}
	return n, nil
}

// loadBalancerCount is how many load balancers the cloud has.
func (e *env) loadBalancerCount(ctx context.Context) (int, error) {
	lbs, err := e.cloud.ListLoadBalancers(ctx, client.ListOptions{PageSize: 1000})
	if err != nil {
		return 0, fmt.Errorf("list load balancers: %w", err)
	}
	return len(lbs), nil
}

// waitTargets waits until want load balancers have targets instances.
func (e *env) waitTargets(ctx context.Context, want, targets int) error {
	return e.until(ctx, fmt.Sprintf("%d load balancers with %d targets", want, targets), func(ctx context.Context) (bool, error) {
		lbs, err := e.cloud.ListLoadBalancers(ctx, client.ListOptions{PageSize: 1000})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, lb := range lbs {
			// TargetHealth has every target the load balancer serves:
			// its own and its backend pools' members.
			if len(lb.TargetHealth) == targets {
				n++
			}
		}
		return n >= want, nil
	})
}

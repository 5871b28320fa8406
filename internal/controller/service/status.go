package service

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stratus-ccm/stratus/pkg/echo"
)

// ConditionLoadBalancerReady is the Service condition the controller maintains.
const ConditionLoadBalancerReady = "LoadBalancerReady"

// Reasons of the LoadBalancerReady condition.
const (
	// ReasonReady: the load balancer exists, has backends, and its status is published.
	ReasonReady = "Ready"
	// ReasonProvisioning: the provider is still creating or changing the load balancer.
	ReasonProvisioning = "Provisioning"
	// ReasonInvalidConfiguration: a stratus annotation is invalid; the cloud was not
	// called. The message names the annotation.
	ReasonInvalidConfiguration = "InvalidConfiguration"
	// ReasonCloudError: the provider failed; the Service is retried with backoff.
	ReasonCloudError = "CloudError"
	// ReasonNoBackends: the load balancer exists but no node qualifies as a backend.
	ReasonNoBackends = "NoBackends"
)

// EventProvisioning is the reason of the Normal event recorded while the
// provider is still provisioning a load balancer (api.RetryError): progress,
// not a failure.
const EventProvisioning = "ProvisioningLoadBalancer"

// notReady is the condition of a Service whose sync failed with err. The
// message is err's, shortened to echo.MaxMessage bytes: it may repeat the
// Service's annotations or a cloud's answer.
func notReady(reason string, err error) metav1.Condition {
	return metav1.Condition{Type: ConditionLoadBalancerReady, Status: metav1.ConditionFalse, Reason: reason, Message: echo.Shorten(err.Error(), echo.MaxMessage)}
}

// readyCondition is the condition of a load balancer ensured from the
// configuration fp, with n backends.
func readyCondition(n int, fp string) metav1.Condition {
	if n == 0 {
		return metav1.Condition{Type: ConditionLoadBalancerReady, Status: metav1.ConditionFalse, Reason: ReasonNoBackends,
			Message: withFingerprint("There are no available nodes for LoadBalancer", fp)}
	}
	return metav1.Condition{Type: ConditionLoadBalancerReady, Status: metav1.ConditionTrue, Reason: ReasonReady,
		Message: withFingerprint("Load balancer is ensured", fp)}
}

// setCondition merges cond into conds; other types are untouched.
func setCondition(conds *[]metav1.Condition, cond metav1.Condition) {
	meta.SetStatusCondition(conds, cond)
}

func removeCondition(conds *[]metav1.Condition, t string) { meta.RemoveStatusCondition(conds, t) }

// hasReadyCondition reports whether svc carries a LoadBalancerReady condition.
func hasReadyCondition(svc *v1.Service) bool {
	return meta.FindStatusCondition(svc.Status.Conditions, ConditionLoadBalancerReady) != nil
}

// setCondition writes cond on svc's status when it differs. The condition has
// no observedGeneration: the API server keeps no metadata.generation for
// Services; the fingerprint in a Ready message says what was ensured.
func (c *Controller) setCondition(ctx context.Context, svc *v1.Service, cond metav1.Condition) error {
	_, err := c.patchService(ctx, svc, true, func(s *v1.Service) { setCondition(&s.Status.Conditions, cond) })
	return err
}

// setReadyCondition records a backend update: Ready or NoBackends after the
// number of backends, with the configuration fingerprint. (The fingerprint has
// no backends: an update that keeps the count above zero writes nothing.) It changes only a
// Ready or NoBackends condition of the same incarnation that still has its load
// balancer — checked on the object being patched, so that a conflict retry never
// resurrects the condition of a Service cleaned up meanwhile.
//
// The fingerprint is that of the Service as last ensured: if svc changed since,
// its pending ensure is not recorded as done.
func (c *Controller) setReadyCondition(ctx context.Context, svc *v1.Service, entry svcState, nodes []*v1.Node) error {
	if entry.ensuredSvc == nil {
		return nil
	}
	cond := readyCondition(len(nodes), fingerprint(entry.provider.Name(), entry.ensuredSvc))
	_, err := c.patchService(ctx, svc, true, func(s *v1.Service) {
		cur := meta.FindStatusCondition(s.Status.Conditions, ConditionLoadBalancerReady)
		if s.UID != entry.ensuredSvc.UID || !hasFinalizer(s) || !wantsLB(s) || s.DeletionTimestamp != nil ||
			cur == nil || (cur.Reason != ReasonReady && cur.Reason != ReasonNoBackends) {
			return
		}
		setCondition(&s.Status.Conditions, cond)
	})
	return err
}

// patchService applies mutate to a copy of svc and, if finalizers or status
// changed, sends the difference as a JSON merge patch with an optimistic lock: to
// the status subresource when status is true, to the object otherwise. On a
// conflict it re-reads the Service from the API server and applies mutate again,
// so nobody else's finalizers or conditions are lost. A Service that is gone is
// not an error. It returns the Service as last written or read.
func (c *Controller) patchService(ctx context.Context, svc *v1.Service, status bool, mutate func(*v1.Service)) (*v1.Service, error) {
	cur := svc
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want := cur.DeepCopy()
		mutate(want)
		if equality.Semantic.DeepEqual(cur.Finalizers, want.Finalizers) && equality.Semantic.DeepEqual(cur.Status, want.Status) {
			return nil
		}
		patch := client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
		var err error
		if status {
			err = c.client.Status().Patch(ctx, want, patch)
		} else {
			err = c.client.Patch(ctx, want, patch)
		}
		switch {
		case err == nil:
			cur = want
		case apierrors.IsConflict(err):
			fresh := &v1.Service{}
			if gerr := c.reader.Get(ctx, client.ObjectKeyFromObject(cur), fresh); gerr != nil {
				return gerr
			}
			cur = fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return cur, nil
	}
	return cur, err
}

// normalizeStatus returns a copy of s as the API server stores it: an ingress IP
// without ipMode gets ipMode VIP. Comparing normalized statuses keeps a provider
// that leaves ipMode unset from causing a status patch on every sync.
func normalizeStatus(s *v1.LoadBalancerStatus) *v1.LoadBalancerStatus {
	out := s.DeepCopy()
	for i := range out.Ingress {
		if out.Ingress[i].IP != "" && out.Ingress[i].IPMode == nil {
			vip := v1.LoadBalancerIPModeVIP
			out.Ingress[i].IPMode = &vip
		}
	}
	return out
}

// ingressEqual compares ingress entries (ip, hostname, ipMode, ports) after
// normalization.
func ingressEqual(a, b *v1.LoadBalancerStatus) bool {
	return equality.Semantic.DeepEqual(normalizeStatus(a).Ingress, normalizeStatus(b).Ingress)
}

// sameAddresses compares the ingress addresses (IPs and hostnames, in order) of a
// and b. The drift check uses it: providers commonly report less from
// GetLoadBalancer (no ports, no ipMode) than from EnsureLoadBalancer, and that
// must not look like drift.
func sameAddresses(a, b *v1.LoadBalancerStatus) bool {
	return slices.EqualFunc(a.Ingress, b.Ingress, func(x, y v1.LoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname
	})
}

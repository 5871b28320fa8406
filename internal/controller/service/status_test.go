package service

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// patchService must not lose a condition another controller wrote between our
// read and our write: the optimistic lock turns the race into a conflict, and the
// retry applies our change to a fresh read.
func TestPatchServiceConflictKeepsOthersConditions(t *testing.T) {
	ctx := context.Background()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	raced := false
	cl := fake.NewClientBuilder().WithObjects(svc).WithStatusSubresource(svc).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if !raced {
				// Another controller writes its condition just before our patch lands.
				raced = true
				var cur v1.Service
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
					return err
				}
				meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: "example.com/Other", Status: metav1.ConditionTrue, Reason: "Mine"})
				if err := c.Status().Update(ctx, &cur); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	var stale v1.Service
	if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), &stale); err != nil {
		t.Fatal(err)
	}
	c := &Controller{client: cl, reader: cl}
	if _, err := c.patchService(ctx, &stale, true, func(s *v1.Service) {
		setCondition(&s.Status.Conditions, readyCondition(1, "fp"))
	}); err != nil {
		t.Fatalf("patchService: %v", err)
	}
	var got v1.Service
	if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), &got); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"example.com/Other", ConditionLoadBalancerReady} {
		if meta.FindStatusCondition(got.Status.Conditions, typ) == nil {
			t.Errorf("condition %s missing after the race: %+v", typ, got.Status.Conditions)
		}
	}
	if !raced {
		t.Fatal("the race was not staged")
	}
}

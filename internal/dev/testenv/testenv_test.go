package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestAPIServerIsReal proves the control plane is a real kube-apiserver: objects
// persist, the status subresource is separate from the spec, validation happens on
// the server and RBAC is enforced.
func TestAPIServerIsReal(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	admin := env.Clientset(t)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-real"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })

	t.Run("status subresource", func(t *testing.T) {
		patch := `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.7"}]},"spec":{"unschedulable":true}}`
		got, err := admin.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatalf("patch status: %v", err)
		}
		if len(got.Status.Addresses) != 1 || got.Status.Addresses[0].Address != "10.0.0.7" {
			t.Fatalf("addresses = %v, want 10.0.0.7", got.Status.Addresses)
		}
		if got.Spec.Unschedulable {
			t.Fatal("the status subresource accepted a spec change")
		}
		again, err := admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Status.Addresses) != 1 || !hasTaint(again, "node.cloudprovider.kubernetes.io/uninitialized") {
			t.Fatalf("stored node lost data: addresses %v taints %v", again.Status.Addresses, again.Spec.Taints)
		}
	})

	t.Run("server-side validation", func(t *testing.T) {
		bad := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 70000}}},
		}
		_, err := admin.CoreV1().Services("default").Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create service with port 70000: err = %v, want Invalid", err)
		}
		if !strings.Contains(err.Error(), "spec.ports[0].port") {
			t.Fatalf("validation error does not name the field: %v", err)
		}
	})

	t.Run("RBAC denies an unprivileged user", func(t *testing.T) {
		user := clientset(t, env.UserConfig(t, "nobody"))
		_, err := user.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list nodes as nobody: err = %v, want Forbidden", err)
		}
	})

	t.Run("service account token, granted then denied", func(t *testing.T) {
		ns := env.Namespace(t)
		sa := clientset(t, env.ServiceAccountConfig(t, ns, "reader"))
		if _, err := sa.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("get node before binding: err = %v, want Forbidden", err)
		}
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "node-reader-" + ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}},
		}
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
			_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
		// The API server's RBAC authorizer reads bindings from its own
		// informers, so a new binding is honored a moment after it is
		// stored; wait for that, and for nothing else.
		var got error
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, got = sa.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			return got == nil || !apierrors.IsForbidden(got), nil
		}); err != nil || got != nil {
			t.Fatalf("get node after binding: %v (wait: %v)", got, err)
		}
		if _, err := sa.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("list secrets as the reader: err = %v, want Forbidden", err)
		}
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

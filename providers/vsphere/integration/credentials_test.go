package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/controller-manager/pkg/clientbuilder"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/providers/vsphere"
)

// TestSecretWithLeastPrivilege: the Role docs/vsphere.md gives (get, list
// and watch on the one Secret, by name) is enough for the provider to read
// its credentials, Initialize returns once it is read, and a rotated
// password is used at the next login.
func TestSecretWithLeastPrivilege(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	v := startVCenter(t, 1)
	host, port, _ := net.SplitHostPort(v.Addr())
	secret(t, cs, ns, v, "not-the-password")
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "stratus-vsphere-credentials", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"vsphere-creds"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "stratus-vsphere-credentials", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ccm", Namespace: ns}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg, err := vsphere.ParseConfig(strings.NewReader(fmt.Sprintf(
		"global:\n  secretName: vsphere-creds\n  secretNamespace: %s\n  caFile: %s\nvcenter:\n  vc:\n    server: %s\n    port: %s\n", ns, v.CAFile(), host, port)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := vsphere.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); c.Close() })
	c.Initialize(clientbuilder.SimpleControllerClientBuilder{ClientConfig: env.ServiceAccountConfig(t, ns, "ccm")}, stop)

	// Initialize returns once the Secret is read: the first listing already
	// tries its (wrong) password, it does not fail with "not read yet".
	if _, err := c.ListInstances(ctx); !errors.Is(err, vsphere.ErrInvalidLogin) {
		t.Fatalf("first listing after Initialize: %v; want the Secret's wrong password refused", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "vsphere-creds", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data[host+".password"] = []byte(v.Password())
		_, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "a listing with the rotated password", func(ctx context.Context) (bool, error) {
		list, err := c.ListInstances(ctx)
		return err == nil && len(list) == 1, nil
	})
}

package monitoring

import (
	"context"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Scraper is the ServiceAccount (in kube-system) whose token a scraper
// presents to /metrics, and the name of the ClusterRole and binding that let
// it: get on the non-resource URL /metrics, the chart's metrics-reader rule.
const Scraper = "stratus-metrics-reader"

// tokenLifetime is how long a granted token is valid: longer than any dev
// session; a new one is granted at each start.
const tokenLifetime = 48 * 3600

// GrantScrapeToken makes sure the Scraper ServiceAccount exists and may get
// /metrics, and writes a token of it to path (mode 0600; the token is never
// logged).
func GrantScrapeToken(ctx context.Context, cs kubernetes.Interface, path string) error {
	const ns = "kube-system"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: Scraper, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount %s/%s: %w", ns, Scraper, err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: Scraper},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRole %s: %w", Scraper, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Scraper},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: Scraper},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Scraper, Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", Scraper, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, Scraper, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenLifetime)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of ServiceAccount %s/%s: %w", ns, Scraper, err)
	}
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		return fmt.Errorf("write the scrape token: %w", err)
	}
	return nil
}

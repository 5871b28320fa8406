package manager_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	testenv.Main(m)
}

// baseArgs is a command line against the test control plane with a unique lease
// in ns.
func baseArgs(t *testing.T, env *testenv.Env, ns string, extra ...string) []string {
	return append([]string{
		"--cloud-provider=" + managertest.ProviderName,
		"--kubeconfig=" + managertest.WriteKubeconfig(t, env.Config),
		"--leader-elect-resource-namespace=" + ns,
		"--leader-elect-resource-name=ccm-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		"--configure-cloud-routes=false",
	}, extra...)
}

// TestServingHealthAndMetrics: the health paths answer anonymously on the secure
// port, with a check per started controller and the leader-election watchdog;
// /metrics needs a token (TokenReview) whose identity may get /metrics
// (SubjectAccessReview).
func TestServingHealthAndMetrics(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	port := testsupport.FreePort(t)
	m := managertest.Start(t, baseArgs(t, env, ns, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+t.TempDir())...)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)

	testsupport.Eventually(t, 60*time.Second, "the service controller's health check", func(ctx context.Context) (bool, error) {
		code, _, err := managertest.Get(ctx, base+"/healthz/service-lb-controller", "")
		return err == nil && code == 200, nil
	})
	for _, path := range []string{"/healthz", "/readyz", "/livez", "/healthz/leaderElection", "/healthz/ping", "/livez/cloud-node-controller"} {
		code, body, err := managertest.Get(context.Background(), base+path, "")
		if err != nil || code != 200 {
			t.Errorf("anonymous GET %s = %d %q, %v; want 200", path, code, body, err)
		}
	}
	if code, _, _ := managertest.Get(context.Background(), base+"/healthz/node-route-controller", ""); code != 404 {
		t.Errorf("GET /healthz/node-route-controller = %d, want 404: the route controller was not started", code)
	}

	ctx := context.Background()
	admin := env.Clientset(t)
	reader := env.ServiceAccountConfig(t, ns, "metrics-reader")
	stranger := env.ServiceAccountConfig(t, ns, "stranger")
	grantPaths(t, admin, ns, "metrics-reader", "/metrics", "/debug/pprof/*")

	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"anonymous", "", 401},
		// As the API server (and upstream's secure serving): a token it
		// rejects is 401.
		{"invalid token", "not-a-token", 401},
		{"authenticated but not authorized", stranger.BearerToken, 403},
		{"authorized", reader.BearerToken, 200},
	} {
		t.Run("metrics/"+tc.name, func(t *testing.T) {
			var code int
			var body string
			// RBAC changes reach the authorizer within a moment; deny answers are cached, so
			// the authorized identity is never asked before it is granted.
			testsupport.Eventually(t, 30*time.Second, "the expected /metrics answer", func(ctx context.Context) (bool, error) {
				var err error
				code, body, err = managertest.Get(ctx, base+"/metrics", tc.token)
				return err == nil && code == tc.want, nil
			})
			if tc.want == 200 && !strings.Contains(body, "controller_runtime_reconcile_total") {
				t.Errorf("/metrics does not expose the controller-runtime metrics:\n%.500s", body)
			}
			// The replica runs the controllers and has read its lease.
			if tc.want == 200 && (!strings.Contains(body, "\nstratus_leader 1\n") || !strings.Contains(body, `stratus_leader_lease_transitions{lease="`+ns+"/")) {
				t.Errorf("/metrics of the leader lacks stratus_leader 1 or its lease's stratus_leader_lease_transitions:\n%s", grepLines(body, "stratus_leader"))
			}
		})
	}
	if code, _, _ := managertest.Get(ctx, base+"/configz", ""); code != 401 {
		t.Errorf("anonymous GET /configz = %d, want 401: only the health paths are anonymous", code)
	}
	// --profiling defaults to true: pprof is served, behind the same checks
	// as /metrics.
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"anonymous", "", 401},
		{"authenticated but not authorized", stranger.BearerToken, 403},
		{"authorized", reader.BearerToken, 200},
	} {
		code, body, err := managertest.Get(ctx, base+"/debug/pprof/heap?debug=1", tc.token)
		if err != nil || code != tc.want {
			t.Errorf("%s: GET /debug/pprof/heap = %d, %v; want %d\n%.300s", tc.name, code, err, tc.want, body)
		}
		if tc.want == 200 && !strings.HasPrefix(body, "heap profile:") {
			t.Errorf("GET /debug/pprof/heap?debug=1 is not a heap profile:\n%.300s", body)
		}
	}
	if err := m.Stop(); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

// TestProfilingOff: with --profiling=false the secure port serves no
// /debug/pprof, not even to an identity allowed to get it.
func TestProfilingOff(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	port := testsupport.FreePort(t)
	// A child process: controller names are unique per process, and
	// another test's manager may have run in this one.
	p := managertest.StartProcess(t, baseArgs(t, env, ns, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--profiling=false")...)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	admin := env.Clientset(t)
	reader := env.ServiceAccountConfig(t, ns, "profile-reader")
	grantPaths(t, admin, ns, "profile-reader", "/metrics", "/debug/pprof/*")
	// The manager caches a rejected token and a denial for a while: ask it
	// only once the API server accepts the token and allows the path.
	testsupport.Eventually(t, 60*time.Second, "the API server to authorize profile-reader", func(ctx context.Context) (bool, error) {
		tr, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: reader.BearerToken}}, metav1.CreateOptions{})
		if err != nil || !tr.Status.Authenticated {
			return false, nil
		}
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: tr.Status.User.Username, Groups: tr.Status.User.Groups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/debug/pprof/heap", Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
	})
	// /metrics answering 200 shows the token is accepted and authorized, so
	// the 404 below is pprof's absence, not a denial.
	testsupport.Eventually(t, 60*time.Second, "/metrics to answer the authorized identity", func(ctx context.Context) (bool, error) {
		code, _, err := managertest.Get(ctx, base+"/metrics", reader.BearerToken)
		return err == nil && code == 200, nil
	})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
		if code, body, err := managertest.Get(context.Background(), base+path, reader.BearerToken); err != nil || code != 404 {
			t.Errorf("GET %s with --profiling=false = %d, %v; want 404\n%.300s", path, code, err, body)
		}
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(45 * time.Second); err != nil {
		t.Fatalf("after SIGTERM the manager exited with %v, want a clean exit\n%s", err, p.Output())
	}
}

// grantPaths lets the ServiceAccount ns/name GET the non-resource URLs paths.
func grantPaths(t *testing.T, cs kubernetes.Interface, ns, name string, paths ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: paths, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
}

// leaseHolder returns the holder of the lease, "" when free or absent.
func leaseHolder(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, *coordinationv1.Lease) {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", l
	}
	return *l.Spec.HolderIdentity, l
}

// TestLeaderElectionTakeover: the first manager leads and runs the controllers;
// a second one stands by; when the leader's process is killed (no release), the
// standby takes over within the lease duration and its controllers serve a
// LoadBalancer Service; a SIGTERM then releases the lease and exits cleanly.
func TestLeaderElectionTakeover(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	ctx := context.Background()
	args := baseArgs(t, env, ns, "--secure-port=0", "--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms", "--controllers=service")
	lease := args[3][len("--leader-elect-resource-name="):]

	first := managertest.StartProcess(t, args...)
	var leader string
	testsupport.Eventually(t, 60*time.Second, "the first manager to lead", func(ctx context.Context) (bool, error) {
		leader, _ = leaseHolder(ctx, cs, ns, lease)
		return leader != "", nil
	})
	second := managertest.StartProcess(t, args...)

	// While the leader lives, its renewals keep the standby out.
	_, l := leaseHolder(ctx, cs, ns, lease)
	renewed := l.Spec.RenewTime.Time
	testsupport.Eventually(t, 30*time.Second, "two renewals by the leader", func(ctx context.Context) (bool, error) {
		holder, l := leaseHolder(ctx, cs, ns, lease)
		if holder != leader {
			return false, fmt.Errorf("lease moved to %q while the leader %q was alive", holder, leader)
		}
		return l.Spec.RenewTime.Sub(renewed) >= time.Second, nil
	})

	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait(10 * time.Second)
	var successor string
	testsupport.Eventually(t, 30*time.Second, "the standby to take over", func(ctx context.Context) (bool, error) {
		successor, _ = leaseHolder(ctx, cs, ns, lease)
		return successor != "" && successor != leader, nil
	})

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 60*time.Second, "the new leader to provision the load balancer", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ing := got.Status.LoadBalancer.Ingress
		return len(ing) == 1 && ing[0].IP == managertest.ExternalIP, nil
	})

	if err := second.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(45 * time.Second); err != nil {
		t.Fatalf("after SIGTERM the manager exited with %v, want a clean exit\n%s", err, second.Output())
	}
	if holder, _ := leaseHolder(ctx, cs, ns, lease); holder != "" {
		t.Errorf("after SIGTERM the lease is still held by %q, want it released", holder)
	}
}

// TestCleanStopLogsNoError: a manager that leads and is stopped as SIGTERM
// stops it returns nil, releases the lease and logs no error, also after Run
// returned (controller-runtime reports the release from a goroutine).
func TestCleanStopLogsNoError(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	// The lifecycle controller is a plain runnable: no controller name that
	// the other in-process managers of this test binary have taken.
	args := baseArgs(t, env, ns, "--secure-port=0", "--controllers=cloud-node-lifecycle")
	lease := args[3][len("--leader-elect-resource-name="):]
	var mu sync.Mutex
	var lines []string
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		lines = append(lines, prefix+" "+args)
		mu.Unlock()
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), logger))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, managertest.Options(t, args...)) }()
	testsupport.Eventually(t, 60*time.Second, "the manager to lead and start its controller", func(ctx context.Context) (bool, error) {
		holder, _ := leaseHolder(ctx, cs, ns, lease)
		return holder != "" && strings.Contains(logged(), "started controller"), nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if holder, _ := leaseHolder(context.Background(), cs, ns, lease); holder != "" {
		t.Errorf("after the stop the lease is still held by %q, want it released", holder)
	}
	// The release is reported asynchronously: give it the time to arrive.
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(logged(), `"error"=`), nil
	})
	if !wait.Interrupted(err) {
		t.Errorf("a clean stop logged an error:\n%s", logged())
	}
}

// TestIgnoredFlagsWarnOnce: each ignored flag given is one klog warning naming
// the flag, so is an enabled controller that does not start (the route
// controller with --configure-cloud-routes=false), and nothing is logged at
// info level as a "WARNING".
func TestIgnoredFlagsWarnOnce(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	p := managertest.StartProcess(t, baseArgs(t, env, ns, "--secure-port=0", "--controllers=service,route",
		"--feature-gates=Foo=true", "--feature-gates=Bar=false", "--contention-profiling")...)
	testsupport.Eventually(t, 60*time.Second, "the service controller to start", func(context.Context) (bool, error) {
		return strings.Contains(p.Output(), "started controller"), nil
	})
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(45 * time.Second); err != nil {
		t.Fatalf("after SIGTERM the manager exited with %v, want a clean exit\n%s", err, p.Output())
	}
	out := p.Output()
	for _, flag := range []string{"--feature-gates", "--contention-profiling"} {
		// klog's header: severity letter W, then mmdd.
		warning := regexp.MustCompile(`(?m)^W\d{4} .*flag ` + flag + ` is accepted for compatibility .* but has no effect`)
		if n := len(warning.FindAllString(out, -1)); n != 1 {
			t.Errorf("%d warnings for %s, want 1:\n%s", n, flag, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^W\d{4} .*controller node-route-controller is enabled but was not started`).FindAllString(out, -1)); n != 1 {
		t.Errorf("%d warnings for the route controller, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "WARNING") {
		t.Errorf("a warning was logged at info level:\n%s", out)
	}
}

// TestProvidersInitializedOnLeaderOnly: a standby builds its provider but does
// not initialize it; the leader initializes it and hands it the informer factory.
func TestProvidersInitializedOnLeaderOnly(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	args := baseArgs(t, env, ns, "--secure-port=0", "--controllers=service")
	lease := args[3][len("--leader-elect-resource-name="):]

	// Another candidate holds the lease, so this manager stands by.
	holder := "someone-else"
	now := metav1.NewMicroTime(time.Now())
	dur := int32(3600)
	_, err := cs.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := len(managertest.Clouds())
	managertest.Start(t, args...)
	testsupport.Eventually(t, 30*time.Second, "the provider to be built", func(context.Context) (bool, error) {
		return len(managertest.Clouds()) > before, nil
	})
	c := managertest.Clouds()[before]
	if c.Initialized() {
		t.Fatal("a standby initialized its provider")
	}
	if err := cs.CoordinationV1().Leases(ns).Delete(context.Background(), lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 60*time.Second, "the provider to be initialized on leadership", func(context.Context) (bool, error) {
		return c.Initialized() && c.HasInformers(), nil
	})
}

// TestInvalidConfigurationStartsNothing: bad values fail Run before anything
// starts, each naming its flag or field.
func TestInvalidConfigurationStartsNothing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cloud-provider=fake", "--controllers=*,ipam"}, "--controllers"},
		{[]string{"--cloud-provider=fake", "--cluster-cidr=10.0.0.0/8,10.1.0.0/16"}, "--cluster-cidr"},
		{[]string{"--cloud-provider=nope"}, `--cloud-provider nope: provider "nope" is not registered`},
		{[]string{"--cloud-provider=fake", "--cloud-config=/nonexistent/cloud.conf"}, "--cloud-config /nonexistent/cloud.conf: open /nonexistent/cloud.conf"},
		{[]string{"--config=/nonexistent/stratus.yaml"}, "/nonexistent/stratus.yaml"},
	} {
		o := managertest.Options(t, append(tc.args, "--kubeconfig=/nonexistent/kubeconfig")...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := manager.Run(ctx, o)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%v) = %v, want an error naming %s", tc.args, err, tc.want)
		}
		if err != nil && !strings.Contains(tc.want, "providers[") && strings.Contains(err.Error(), "providers[") {
			t.Errorf("Run(%v) = %v: names a config path the command line did not write", tc.args, err)
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

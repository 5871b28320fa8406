// Package deploy_test proves the Helm chart and the kustomize base: they render,
// the real API server accepts them (server-side dry-run), and the chart's RBAC is
// exactly enough for the manager to do its job, and no more.
package deploy_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud" // registers "minicloud" for the sidecar's child
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	// The parallel tests (ownControlPlane) all at once unless
	// -test.parallel says otherwise: they mostly wait for their managers.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "3")
	}
	testenv.Main(m)
}

// ownControlPlane starts a control plane for one test, stopped when the test
// ends. The longest tests, which run a manager, run in parallel, each on a
// control plane of its own: a manager acts on every Node of its cluster and
// the chart's cluster-wide RBAC has fixed names, so two of them must not
// share one (the others run one after another on the package's).
func ownControlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped under -short")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	return env
}

// tool returns the path of a hack/kubebins binary, failing the test with the
// build command when it is missing.
func tool(t *testing.T, env *testenv.Env, name string) string {
	t.Helper()
	path := filepath.Join(env.BinDir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found in %s: run `hack/kubebins/build.sh`", name, env.BinDir)
	}
	return path
}

func run(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// applyChartRBAC renders the chart in ns and applies its ServiceAccount and RBAC
// for real; the cluster-scoped objects are deleted when the test ends.
func applyChartRBAC(t *testing.T, env *testenv.Env, ns string, set ...string) {
	t.Helper()
	rendered := helmTemplate(t, env, ns, set...)
	rbac := selectDocs(rendered, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	kc := managertest.WriteKubeconfig(t, env.Config)
	run(t, rbac, tool(t, env, "kubectl"), "--kubeconfig", kc, "apply", "--server-side", "--field-manager=stratus-test", "-f", "-")
	t.Cleanup(func() { deleteDocs(t, env, kc, selectDocs(rendered, "ClusterRole", "ClusterRoleBinding")) })
}

// deleteDocs deletes the objects of manifests, ignoring those already gone; for
// cleanups of cluster-scoped objects.
func deleteDocs(t *testing.T, env *testenv.Env, kubeconfig string, manifests []byte) {
	cmd := exec.Command(tool(t, env, "kubectl"), "--kubeconfig", kubeconfig, "delete", "--ignore-not-found", "-f", "-")
	cmd.Stdin = bytes.NewReader(manifests)
	_ = cmd.Run()
}

// helmTemplate renders the chart as release "stratus" in ns.
func helmTemplate(t *testing.T, env *testenv.Env, ns string, set ...string) []byte {
	t.Helper()
	args := []string{"template", "stratus", "helm/stratus", "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return run(t, nil, tool(t, env, "helm"), args...)
}

// dryRun applies manifests with a server-side dry run: the API server validates
// and admits every object without storing it.
func dryRun(t *testing.T, env *testenv.Env, manifests []byte) {
	t.Helper()
	kc := managertest.WriteKubeconfig(t, env.Config)
	out := run(t, manifests, tool(t, env, "kubectl"), "--kubeconfig", kc, "apply", "--server-side",
		"--dry-run=server", "--field-manager=stratus-test", "-f", "-")
	if !strings.Contains(string(out), "serverside-applied (server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server applied nothing:\n%s", out)
	}
}

func TestChartLints(t *testing.T) {
	env := testenv.Get(t)
	run(t, nil, tool(t, env, "helm"), "lint", "helm/stratus", "--set", "cloudProvider=fake")
}

// TestChartAcceptedByAPIServer renders the chart in its main variants and has the
// real API server admit every object.
func TestChartAcceptedByAPIServer(t *testing.T) {
	env := testenv.Get(t)
	for _, tc := range []struct {
		name string
		set  []string
		want []string // substrings of the rendering
	}{
		{
			name: "defaults",
			set:  []string{"cloudProvider=fake"},
			want: []string{"kind: Deployment", "replicas: 2", "hostNetwork: true", "priorityClassName: system-cluster-critical",
				"node.cloudprovider.kubernetes.io/uninitialized", "node-role.kubernetes.io/control-plane", "node.kubernetes.io/not-ready",
				"path: /healthz", "containerPort: 10258", "--leader-elect-resource-name=cloud-controller-manager"},
		},
		{
			name: "daemonset with inline cloud config",
			set:  []string{"cloudProvider=fake", "kind=DaemonSet", "hostNetwork=false", "cloudConfig.content=token: x"},
			want: []string{"kind: DaemonSet", "kind: Secret", "--cloud-config=/etc/stratus/cloud-config/cloud.conf", "secretName: stratus-cloud-config"},
		},
		{
			name: "plugin sidecars",
			set: []string{"plugins[0].name=mc", "plugins[0].provider=minicloud", "plugins[0].cloudConfig.existingSecret=mc-creds",
				"plugins[0].providerConfig.budget.rate=20", "plugins[1].name=other", "plugins[1].image.repository=example.com/other",
				"plugins[1].command[0]=/other-plugin", "managerConfig.providers[0].name=a", "managerConfig.providers[0].type=fake"},
			want: []string{"initContainers:", "name: plugin-mc", "restartPolicy: Always", "- --provider=minicloud", "- --socket=/run/stratus/mc.sock",
				"- --cloud-config=/etc/stratus/plugin-config/cloud.conf", "secretName: mc-creds", "name: plugin-sockets", "medium: Memory",
				"address: unix:///run/stratus/mc.sock", "address: unix:///run/stratus/other.sock", "image: \"example.com/other:0.1.0\"",
				"- /other-plugin", "--config=/etc/stratus/config/config.yaml", "- name: a\n      type: fake"},
		},
		{
			name: "manager config",
			set:  []string{"managerConfig.providers[0].name=a", "managerConfig.providers[0].type=fake", "cloudConfig.existingSecret=creds"},
			want: []string{"kind: ConfigMap", "--config=/etc/stratus/config/config.yaml", "kind: ManagerConfig", "secretName: creds"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := helmTemplate(t, env, "kube-system", tc.set...)
			for _, w := range tc.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("rendering lacks %q", w)
				}
			}
			dryRun(t, env, out)
		})
	}
}

// TestChartRejectsMissingProvider: without a provider the chart does not render.
func TestChartRejectsMissingProvider(t *testing.T) {
	env := testenv.Get(t)
	cmd := exec.Command(tool(t, env, "helm"), "template", "stratus", "helm/stratus")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "set cloudProvider") {
		t.Fatalf("helm template without a provider: %v\n%s", err, out)
	}
}

// TestKustomizeBaseMatchesChart: the committed base is what generate.sh renders
// from the chart now.
func TestKustomizeBaseMatchesChart(t *testing.T) {
	env := testenv.Get(t)
	committed, err := os.ReadFile("kustomize/base/stratus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "stratus.yaml")
	cmd := exec.Command("kustomize/generate.sh", fresh)
	cmd.Env = append(os.Environ(), "KUBEBINS_DIR="+env.BinDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, out)
	}
	got, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, got) {
		t.Fatal("deploy/kustomize/base/stratus.yaml is out of date with the chart: run deploy/kustomize/generate.sh")
	}
}

// TestKustomizeAcceptedByAPIServer builds the base and the example overlay with
// kubectl kustomize and has the API server admit them.
func TestKustomizeAcceptedByAPIServer(t *testing.T) {
	env := testenv.Get(t)
	for _, dir := range []string{"kustomize/base", "kustomize/overlays/example", "kustomize/overlays/plugin"} {
		t.Run(dir, func(t *testing.T) {
			out := run(t, nil, tool(t, env, "kubectl"), "kustomize", dir)
			if !bytes.Contains(out, []byte("kind: Deployment")) {
				t.Fatalf("kustomize %s has no Deployment:\n%s", dir, out)
			}
			dryRun(t, env, out)
		})
	}
}

// TestChartPluginsKeepRBAC: plugin sidecars add no permission (and the
// ServiceAccount is the same): the RBAC rendered with plugins is the one
// rendered without.
func TestChartPluginsKeepRBAC(t *testing.T) {
	env := testenv.Get(t)
	kinds := []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	without := selectDocs(helmTemplate(t, env, "kube-system", "cloudProvider=minicloud"), kinds...)
	with := selectDocs(helmTemplate(t, env, "kube-system", "plugins[0].name=mc", "plugins[0].provider=minicloud"), kinds...)
	if len(without) == 0 || !bytes.Equal(without, with) {
		t.Errorf("the RBAC differs with plugins:\n%s\nwithout:\n%s", with, without)
	}
	dep := deployment(t, helmTemplate(t, env, "kube-system", "plugins[0].name=mc", "plugins[0].provider=minicloud"))
	if sa := dep.Spec.Template.Spec.ServiceAccountName; sa != "stratus" {
		t.Errorf("serviceAccountName %q with plugins, want stratus", sa)
	}
}

// TestChartRejectsBadPlugins: each mistake in plugins stops the rendering
// with an error naming the value.
func TestChartRejectsBadPlugins(t *testing.T) {
	env := testenv.Get(t)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"plugins[0].provider=minicloud"}, "plugins[0].name is required"},
		{[]string{"plugins[0].name=Mc", "plugins[0].provider=minicloud"}, `plugins[0].name "Mc": must be a DNS label`},
		{[]string{"plugins[0].name=mc"}, "plugins: mc: provider (or command) is required"},
		{[]string{"plugins[0].name=mc", "plugins[0].provider=a", "plugins[1].name=mc", "plugins[1].provider=b"}, `plugins[1].name "mc": used twice`},
		{[]string{"cloudProvider=minicloud", "plugins[0].name=mc", "plugins[0].provider=minicloud"}, "cloudProvider and plugins: set one"},
	} {
		args := []string{"template", "stratus", "helm/stratus"}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(tool(t, env, "helm"), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("helm template --set %s: %v; want an error containing %q\n%s", strings.Join(tc.set, ","), err, tc.want, out)
		}
	}
}

// TestKustomizePluginOverlayMatchesChart: the plugin overlay's pod and
// ManagerConfig are what the chart renders for the same plugin, so the two
// ways of installing cannot drift apart.
func TestKustomizePluginOverlayMatchesChart(t *testing.T) {
	env := testenv.Get(t)
	overlay := run(t, nil, tool(t, env, "kubectl"), "kustomize", "kustomize/overlays/plugin")
	chart := run(t, nil, tool(t, env, "helm"), "template", "stratus", "helm/stratus", "--namespace", "kube-system",
		"--values", "kustomize/base/values.yaml", "--set", "cloudProvider=", "--set", "cloudConfig.existingSecret=",
		"--set", "plugins[0].name=mc", "--set", "plugins[0].provider=minicloud", "--set", "plugins[0].cloudConfig.existingSecret=stratus-cloud-config")
	want, got := deployment(t, chart).Spec.Template.Spec, deployment(t, overlay).Spec.Template.Spec
	byName := func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(want.Volumes, byName)
	slices.SortFunc(got.Volumes, byName)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the plugin overlay's pod differs from the chart's (-chart +overlay):\n%s", diff)
	}
	// The overlay's file ends with a newline, the chart's block does not.
	w := strings.TrimSpace(configMap(t, chart, "stratus-config").Data["config.yaml"])
	g := strings.TrimSpace(configMap(t, overlay, "stratus-config").Data["config.yaml"])
	if w == "" || w != g {
		t.Errorf("the plugin overlay's ManagerConfig differs from the chart's (-chart +overlay):\n%s", cmp.Diff(w, g))
	}
}

// TestChartPluginSidecarRuns runs what the chart renders for a plugin: the
// sidecar's command line (`stratus-ccm plugin serve` with the rendered
// flags, the pod's paths moved into a temporary folder) and the manager with
// the rendered ManagerConfig and flags; the manager initializes a Node
// through the sidecar's minicloud provider.
func TestChartPluginSidecarRuns(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	admin := env.Clientset(t)
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{NoDataPlane: true})
	name := "plugin-node-" + ns
	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}

	rendered := helmTemplate(t, env, ns, "plugins[0].name=mc", "plugins[0].provider=minicloud", "plugins[0].cloudConfig.existingSecret=mc-creds")
	spec := deployment(t, rendered).Spec.Template.Spec
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("pod of %d sidecars and %d containers, want 1 and 1", len(spec.InitContainers), len(spec.Containers))
	}
	// The pod's paths, in a folder short enough for a Unix socket path.
	dir, err := os.MkdirTemp("", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	paths := strings.NewReplacer("/run/stratus", filepath.Join(dir, "run"), "/etc/stratus/plugin-config", filepath.Join(dir, "plugin-config"),
		"/etc/stratus/config", filepath.Join(dir, "config"))
	for _, sub := range []string{"run", "plugin-config", "config"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The Secret mc-creds, as the kubelet would mount it.
	if err := os.WriteFile(filepath.Join(dir, "plugin-config", "cloud.conf"), fmt.Appendf(nil, "url: %s\ntoken: %s\n", mc.URL, mc.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	// The ConfigMap, as the kubelet would mount it.
	config := paths.Replace(configMap(t, rendered, "stratus-config").Data["config.yaml"])
	if err := os.WriteFile(filepath.Join(dir, "config", "config.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	sidecar := make([]string, 0, len(spec.InitContainers[0].Args))
	for _, a := range spec.InitContainers[0].Args {
		sidecar = append(sidecar, paths.Replace(a))
	}
	managertest.StartCommand(t, sidecar...)

	kc := managertest.WriteKubeconfig(t, env.Config)
	args := []string{"--kubeconfig=" + kc}
	for _, a := range spec.Containers[0].Args {
		if strings.HasPrefix(a, "--secure-port=") {
			a = "--secure-port=0" // one port per test run
		}
		args = append(args, paths.Replace(a))
	}
	managertest.StartProcess(t, args...)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	testsupport.EventuallyState(t, 90*time.Second, "the node to be initialized through the sidecar", func(ctx context.Context) (bool, string) {
		got, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("taints %v, provider ID %q, labels %v", got.Spec.Taints, got.Spec.ProviderID, got.Labels)
		for _, taint := range got.Spec.Taints {
			if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
				return false, state
			}
		}
		return got.Spec.ProviderID == mcprovider.ProviderID(inst.ID) && got.Labels[corev1.LabelTopologyZone] == "mc-central-a", state
	})
}

// deployment returns the one Deployment of manifests.
func deployment(t *testing.T, manifests []byte) *appsv1.Deployment {
	t.Helper()
	docs := selectDocs(manifests, "Deployment")
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(docs, d); err != nil || d.Name == "" {
		t.Fatalf("no Deployment in the manifests (%v):\n%s", err, manifests)
	}
	return d
}

// configMap returns the ConfigMap name of manifests.
func configMap(t *testing.T, manifests []byte, name string) *corev1.ConfigMap {
	t.Helper()
	for _, doc := range bytes.Split(selectDocs(manifests, "ConfigMap"), []byte("\n---")) {
		cm := &corev1.ConfigMap{}
		if err := yaml.Unmarshal(doc, cm); err == nil && cm.Name == name {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %s in the manifests:\n%s", name, manifests)
	return nil
}

// TestChartRBACIsExactlyEnough applies the chart's ServiceAccount and RBAC for
// real, runs the manager with that ServiceAccount's token (leader election,
// serving with delegated authn/authz, node and service controllers), and checks
// that it does its job while a request outside its rules (listing Secrets) is
// denied.
func TestChartRBACIsExactlyEnough(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	admin := env.Clientset(t)
	ctx := context.Background()

	applyChartRBAC(t, env, ns, "cloudProvider=fake")

	sa := env.ServiceAccountConfig(t, ns, "stratus")
	asSA, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asSA.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the chart's ServiceAccount: %v, want Forbidden", err)
	}
	if _, err := asSA.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets in its own namespace: %v, want Forbidden", err)
	}

	port := testsupport.FreePort(t)
	managertest.Start(t,
		"--cloud-provider="+managertest.ProviderName,
		"--kubeconfig="+managertest.WriteKubeconfig(t, sa),
		"--leader-elect-resource-namespace="+ns,
		"--configure-cloud-routes=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
	)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-node-" + ns},
		Spec: corev1.NodeSpec{ProviderID: "fake://" + ns, Taints: []corev1.Taint{{
			Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	testsupport.EventuallyState(t, 90*time.Second, "the node to be initialized", func(ctx context.Context) (bool, string) {
		got, err := admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("taints %v, labels %v", got.Spec.Taints, got.Labels)
		for _, taint := range got.Spec.Taints {
			if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
				return false, state
			}
		}
		return got.Labels[corev1.LabelTopologyZone] == managertest.Zone, state
	})
	testsupport.Eventually(t, 90*time.Second, "the load balancer to be provisioned", func(ctx context.Context) (bool, error) {
		s, err := admin.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ing := s.Status.LoadBalancer.Ingress
		return len(ing) == 1 && ing[0].IP == managertest.ExternalIP && len(s.Finalizers) == 1, nil
	})
	testsupport.Eventually(t, 30*time.Second, "an event from the service controller", func(ctx context.Context) (bool, error) {
		evs, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Source.Component == "service-controller" {
				return true, nil
			}
		}
		return false, nil
	})
	if holder := leaseHolder(ctx, admin, ns); holder == "" {
		t.Error("the manager did not take the lease in its namespace")
	}

	// The manager's token and access reviews work: a scraper bound to the chart's
	// metrics-reader ClusterRole reads /metrics.
	scraper := env.ServiceAccountConfig(t, ns, "scraper")
	bindClusterRole(t, admin, "stratus-metrics-reader", ns, "scraper")
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	testsupport.Eventually(t, 30*time.Second, "the scraper to read /metrics", func(ctx context.Context) (bool, error) {
		code, _, err := managertest.Get(ctx, base+"/metrics", scraper.BearerToken)
		return err == nil && code == 200, nil
	})
	if code, _, _ := managertest.Get(ctx, base+"/healthz", ""); code != 200 {
		t.Errorf("anonymous /healthz = %d, want 200", code)
	}
}

func leaseHolder(ctx context.Context, cs kubernetes.Interface, ns string) string {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// bindClusterRole binds the ClusterRole to the ServiceAccount ns/sa.
func bindClusterRole(t *testing.T, cs kubernetes.Interface, role, ns, sa string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	})
}

// selectDocs returns the YAML documents of the given kinds.
func selectDocs(manifests []byte, kinds ...string) []byte {
	var out [][]byte
	for _, doc := range bytes.Split(manifests, []byte("\n---")) {
		for _, k := range kinds {
			if bytes.Contains(doc, []byte("\nkind: "+k+"\n")) {
				out = append(out, doc)
				break
			}
		}
	}
	return bytes.Join(out, []byte("\n---"))
}

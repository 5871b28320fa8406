package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/deploy/mixin"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
)

// The prometheus-operator objects the chart renders, as far as the tests
// read them.
type (
	monitorEndpoint struct {
		Port          string `json:"port"`
		Scheme        string `json:"scheme"`
		Path          string `json:"path"`
		Authorization struct {
			Type        string `json:"type"`
			Credentials struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"credentials"`
		} `json:"authorization"`
		TLSConfig struct {
			InsecureSkipVerify bool `json:"insecureSkipVerify"`
		} `json:"tlsConfig"`
		Relabelings []struct {
			Action      string `json:"action"`
			TargetLabel string `json:"targetLabel"`
			Replacement string `json:"replacement"`
		} `json:"relabelings"`
	}
	monitor struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Selector            metav1.LabelSelector          `json:"selector"`
			NamespaceSelector   struct{ MatchNames []string } `json:"namespaceSelector"`
			Endpoints           []monitorEndpoint             `json:"endpoints"`
			PodMetricsEndpoints []monitorEndpoint             `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
)

// decodeDoc decodes the object of kind named name (any name when empty)
// into v.
func decodeDoc(t *testing.T, manifests []byte, kind, name string, v any) {
	t.Helper()
	for _, doc := range bytes.Split(selectDocs(manifests, kind), []byte("\n---")) {
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if yaml.Unmarshal(doc, &meta) != nil || (name != "" && meta.Metadata.Name != name) {
			continue
		}
		if err := yaml.Unmarshal(doc, v); err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
		return
	}
	t.Fatalf("no %s %s in the rendering", kind, name)
}

// TestChartMonitoringOffByDefault: without the monitoring block the chart
// renders no monitoring object.
func TestChartMonitoringOffByDefault(t *testing.T) {
	env := testenv.Get(t)
	out := helmTemplate(t, env, "kube-system", "cloudProvider=fake")
	for _, k := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		if len(selectDocs(out, k)) > 0 {
			t.Errorf("default rendering has a %s", k)
		}
	}
	for _, s := range []string{"grafana_dashboard", "-scraper"} {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("default rendering contains %q", s)
		}
	}
}

// TestChartMonitoring renders the monitoring objects and checks them: the
// API server admits the core ones and grants the scraper get on /metrics
// (a real SubjectAccessReview), the ServiceMonitor selects the metrics
// Service's port and the PodMonitor the pods' with the scraper's token, the
// PrometheusRule carries exactly the mixin's groups and passes promtool,
// and the dashboard ConfigMap has the sidecar label and the dashboard.
func TestChartMonitoring(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"cloudProvider=fake", "monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
		"monitoring.prometheusRule.labels.release=kps",
		"monitoring.metricsReaderSubjects[0].kind=ServiceAccount", "monitoring.metricsReaderSubjects[0].name=prometheus-k8s",
		"monitoring.metricsReaderSubjects[0].namespace=monitoring"}
	sm := helmTemplate(t, env, ns, append(base, "monitoring.serviceMonitor.enabled=true")...)
	pm := helmTemplate(t, env, ns, append(base, "monitoring.podMonitor.enabled=true")...)

	// The core objects, admitted by the API server; the scraper's RBAC
	// applied for real and asked about.
	dryRun(t, env, selectDocs(sm, "ServiceAccount", "Secret", "ConfigMap", "Service", "ClusterRole", "ClusterRoleBinding"))
	kc := managertest.WriteKubeconfig(t, env.Config)
	var rbacDocs [][]byte
	for _, doc := range bytes.Split(selectDocs(sm, "ClusterRole", "ClusterRoleBinding"), []byte("\n---")) {
		if bytes.Contains(doc, []byte("name: stratus-metrics-reader\n")) {
			rbacDocs = append(rbacDocs, doc)
		}
	}
	rbac := bytes.Join(rbacDocs, []byte("\n---"))
	run(t, rbac, tool(t, env, "kubectl"), "--kubeconfig", kc, "apply", "--server-side", "--field-manager=stratus-test", "-f", "-")
	t.Cleanup(func() { deleteDocs(t, env, kc, rbac) })
	for _, user := range []string{"system:serviceaccount:" + ns + ":stratus-scraper", "system:serviceaccount:monitoring:prometheus-k8s"} {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sar.Status.Allowed {
			t.Errorf("%s may not get /metrics: %s", user, sar.Status.Reason)
		}
	}

	// The token the monitors present is the scraper's.
	var secret corev1.Secret
	decodeDoc(t, sm, "Secret", "stratus-scraper-token", &secret)
	if secret.Type != corev1.SecretTypeServiceAccountToken || secret.Annotations[corev1.ServiceAccountNameKey] != "stratus-scraper" {
		t.Errorf("scraper token Secret %s: type %s, for %q", secret.Name, secret.Type, secret.Annotations[corev1.ServiceAccountNameKey])
	}
	checkEndpoint := func(kind string, e monitorEndpoint) {
		t.Helper()
		if e.Port != "https" || e.Scheme != "https" || e.Path != "/metrics" {
			t.Errorf("%s endpoint %s %s %s, want https https /metrics", kind, e.Port, e.Scheme, e.Path)
		}
		if c := e.Authorization.Credentials; e.Authorization.Type != "Bearer" || c.Name != secret.Name || c.Key != "token" {
			t.Errorf("%s authorization %+v, want Bearer from %s/token", kind, e.Authorization, secret.Name)
		}
		if !e.TLSConfig.InsecureSkipVerify {
			t.Errorf("%s: the self-signed serving certificate is verified", kind)
		}
		if len(e.Relabelings) != 1 || e.Relabelings[0].TargetLabel != "job" || e.Relabelings[0].Replacement != "stratus-ccm" {
			t.Errorf("%s relabelings %+v, want job=stratus-ccm (the mixin's selector)", kind, e.Relabelings)
		}
	}

	// The ServiceMonitor selects the metrics Service, on its https port.
	var smon monitor
	decodeDoc(t, sm, "ServiceMonitor", "", &smon)
	var svc corev1.Service
	decodeDoc(t, sm, "Service", "stratus-metrics", &svc)
	sel, err := metav1.LabelSelectorAsSelector(&smon.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select Service %s (%v): %v", smon.Spec.Selector, svc.Name, svc.Labels, err)
	}
	if len(smon.Spec.Endpoints) != 1 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != smon.Spec.Endpoints[0].Port {
		t.Fatalf("ServiceMonitor endpoints %+v, Service ports %+v", smon.Spec.Endpoints, svc.Spec.Ports)
	}
	checkEndpoint("ServiceMonitor", smon.Spec.Endpoints[0])
	if strings.Join(smon.Spec.NamespaceSelector.MatchNames, ",") != ns {
		t.Errorf("ServiceMonitor namespaces %v, want %s", smon.Spec.NamespaceSelector.MatchNames, ns)
	}

	// The PodMonitor selects the manager's pods, on their https port.
	var pmon monitor
	decodeDoc(t, pm, "PodMonitor", "", &pmon)
	dep := deployment(t, pm)
	if sel, err := metav1.LabelSelectorAsSelector(&pmon.Spec.Selector); err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %v does not select the pods (%v): %v", pmon.Spec.Selector, dep.Spec.Template.Labels, err)
	}
	if len(pmon.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor endpoints %+v", pmon.Spec.PodMetricsEndpoints)
	}
	checkEndpoint("PodMonitor", pmon.Spec.PodMetricsEndpoints[0])
	port := false
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			port = port || p.Name == pmon.Spec.PodMetricsEndpoints[0].Port
		}
	}
	if !port {
		t.Errorf("no container port named %s", pmon.Spec.PodMetricsEndpoints[0].Port)
	}

	// The PrometheusRule: the mixin's groups, which promtool accepts.
	var rule struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	decodeDoc(t, sm, "PrometheusRule", "", &rule)
	if rule.Metadata.Labels["release"] != "kps" {
		t.Errorf("PrometheusRule labels %v lack monitoring.prometheusRule.labels", rule.Metadata.Labels)
	}
	r, err := mixin.Render(nil)
	if err != nil {
		t.Fatal(err)
	}
	var rules, alerts struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(r.Rules, &rules); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(r.Alerts, &alerts); err != nil {
		t.Fatal(err)
	}
	want, _ := yaml.Marshal(append(rules.Groups, alerts.Groups...))
	got, _ := yaml.Marshal(rule.Spec.Groups)
	if !bytes.Equal(got, want) {
		t.Errorf("PrometheusRule groups differ from the mixin's:\n%s\nwant:\n%s", got, want)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): install the Debian package prometheus (hack/ci-packages.txt lists it)", err)
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	body, _ := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the PrometheusRule's groups: %v\n%s", err, out)
	}

	// The dashboard, for Grafana's sidecar.
	cm := configMap(t, sm, "stratus-dashboards")
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard: \"1\"", cm.Labels)
	}
	// A YAML block scalar may drop the file's final newline.
	if strings.TrimSpace(cm.Data["stratus-overview.json"]) != strings.TrimSpace(string(r.Dashboards["stratus-overview.json"])) {
		t.Errorf("dashboard ConfigMap's stratus-overview.json differs from the mixin's dashboard")
	}
}

// TestChartMonitoringRejectsBoth: a ServiceMonitor and a PodMonitor would
// scrape every replica twice.
func TestChartMonitoringRejectsBoth(t *testing.T) {
	env := testenv.Get(t)
	out, err := exec.Command(tool(t, env, "helm"), "template", "stratus", "helm/stratus", "--set", "cloudProvider=fake",
		"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.podMonitor.enabled=true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "enable one of them") {
		t.Errorf("helm template with both monitors: %v\n%s", err, out)
	}
}

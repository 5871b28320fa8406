package deploy_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os/exec"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// TestChartWebhook: webhook.enabled=true adds the webhook's flags, port and
// certificate to the manager and registers it so that it never blocks a
// cluster (failurePolicy Ignore, a short timeout, only LoadBalancer
// Services, kube-system left out); the API server admits every object (the
// CEL match condition compiles), and the generated certificate verifies
// with the registered CA bundle for the Service's name. With cert-manager's
// API present, cert-manager issues the certificate and injects the bundle.
// Off, nothing of it is rendered.
func TestChartWebhook(t *testing.T) {
	env := testenv.Get(t)
	if out := helmTemplate(t, env, "kube-system", "cloudProvider=fake"); bytes.Contains(out, []byte("webhook")) {
		t.Errorf("the default rendering mentions the webhook:\n%s", out)
	}

	out := helmTemplate(t, env, "kube-system", "cloudProvider=fake", "webhook.enabled=true")
	for _, w := range []string{"- --webhooks=service-load-balancer", "- --webhook-secure-port=10260",
		"- --webhook-tls-cert-file=/etc/stratus/webhook-tls/tls.crt", "containerPort: 10260", "secretName: stratus-webhook-tls"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("rendering lacks %q", w)
		}
	}
	dryRun(t, env, out)

	var hooks admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(selectDocs(out, "ValidatingWebhookConfiguration"), &hooks); err != nil {
		t.Fatal(err)
	}
	if len(hooks.Webhooks) != 1 {
		t.Fatalf("webhooks: %+v", hooks.Webhooks)
	}
	h := hooks.Webhooks[0]
	svc := h.ClientConfig.Service
	if *h.FailurePolicy != admissionregistrationv1.Ignore || *h.TimeoutSeconds != 5 || svc == nil || svc.Name != "stratus-webhook" ||
		*svc.Path != "/validate-service-load-balancer" || len(h.MatchConditions) != 1 ||
		h.MatchConditions[0].Expression != "object.spec.type == 'LoadBalancer'" ||
		h.NamespaceSelector == nil || len(h.NamespaceSelector.MatchExpressions) != 1 ||
		h.NamespaceSelector.MatchExpressions[0].Values[0] != "kube-system" {
		t.Errorf("webhook registration %+v", h)
	}

	var secret corev1.Secret
	if err := yaml.Unmarshal(selectDocs(out, "Secret"), &secret); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(h.ClientConfig.CABundle) {
		t.Fatalf("caBundle holds no certificate: %q", h.ClientConfig.CABundle)
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatalf("Secret %s has no certificate", secret.Name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "stratus-webhook.kube-system.svc"}); err != nil {
		t.Errorf("the serving certificate does not verify with the registered CA for the Service's name: %v", err)
	}

	cm := string(helmTemplate(t, env, "kube-system", "cloudProvider=fake", "webhook.enabled=true", "webhook.certificates=cert-manager"))
	for _, w := range []string{"kind: Certificate", "kind: Issuer", "cert-manager.io/inject-ca-from: kube-system/stratus-webhook", "secretName: stratus-webhook-tls"} {
		if !strings.Contains(cm, w) {
			t.Errorf("cert-manager rendering lacks %q", w)
		}
	}
	if strings.Contains(cm, "caBundle:") || strings.Contains(cm, "kind: Secret\n") {
		t.Error("the cert-manager rendering generates a certificate of its own")
	}

	bad := exec.Command(tool(t, env, "helm"), "template", "stratus", "helm/stratus", "--set", "cloudProvider=fake",
		"--set", "webhook.enabled=true", "--set", "webhook.certificates=manual")
	if msg, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(msg), `webhook.certificates "manual": want auto, cert-manager or self-signed`) {
		t.Errorf("webhook.certificates=manual: %v\n%s", err, msg)
	}
}

package manager

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/webhook"
)

// WebhookNames lists the admission webhooks stratus-ccm serves (--webhooks).
var WebhookNames = []string{webhook.Name}

// selfSignedWebhookPairName is the base name of the webhook's generated
// certificate in --webhook-cert-dir, as upstream names it.
const selfSignedWebhookPairName = "cloud-controller-manager-webhook"

// validateWebhookNames rejects unknown names in a --webhooks list ("*",
// names, either prefixed with "-").
func validateWebhookNames(list []string) error {
	var unknown []string
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item != "*" && !slices.Contains(WebhookNames, strings.TrimPrefix(item, "-")) {
			unknown = append(unknown, fmt.Sprintf("%q", item))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("--webhooks: unknown webhook %s (known: *, %s, each optionally prefixed with -)",
			strings.Join(unknown, ", "), strings.Join(WebhookNames, ", "))
	}
	return nil
}

// webhookEnabled applies upstream's --webhooks semantics, those of
// --controllers: the first item naming the webhook decides; without one, "*"
// enables it. The flag's default is empty, so every webhook is off unless
// listed.
func webhookEnabled(name string, list []string) bool {
	star := false
	for _, item := range list {
		item = strings.TrimSpace(item)
		switch item {
		case "*":
			star = true
		case name:
			return true
		case "-" + name:
			return false
		}
	}
	return star
}

// webhooksServed reports whether the webhook port is opened: a webhook is
// enabled and --webhook-secure-port is not 0.
func (o *Options) webhooksServed() bool {
	return o.WebhookSecurePort > 0 && webhookEnabled(webhook.Name, o.Webhooks)
}

// newWebhookServer returns the webhook server, on --webhook-bind-address and
// --webhook-secure-port with its own certificate, or nil when no webhook is
// served. It runs on every replica: the API server calls any of them.
func (o *Options) newWebhookServer(mgr manager.Manager, clouds *cloud.Set, log logr.Logger) (crwebhook.Server, error) {
	if !o.webhooksServed() {
		return nil, nil
	}
	tlsCfg, err := servingTLS(mgr, log, tlsFlags{
		prefix: "webhook-", certFile: o.WebhookTLSCertFile, keyFile: o.WebhookTLSPrivateKeyFile, certDir: o.WebhookCertDir,
		pairName: selfSignedWebhookPairName, minVersion: o.WebhookTLSMinVersion, cipherSuites: o.WebhookTLSCipherSuites,
	})
	if err != nil {
		return nil, err
	}
	getCert := tlsCfg.GetCertificate
	if getCert == nil {
		pair := &tlsCfg.Certificates[0]
		getCert = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair, nil }
	}
	protos := []string{"h2", "http/1.1"}
	if o.WebhookDisableHTTP2 {
		protos = []string{"http/1.1"}
	}
	srv := crwebhook.NewServer(crwebhook.Options{
		Host: o.WebhookBindAddress,
		Port: o.WebhookSecurePort,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = getCert
			c.MinVersion = tlsCfg.MinVersion
			c.CipherSuites = tlsCfg.CipherSuites
			c.NextProtos = protos
		}},
	})
	srv.Register(webhook.Path, webhook.Handler(&webhook.Validator{Clouds: clouds, ClusterName: o.ClusterName}))
	log.Info("serving admission webhook", "webhook", webhook.Name, "path", webhook.Path,
		"address", fmt.Sprintf("%s:%d", o.WebhookBindAddress, o.WebhookSecurePort))
	return srv, nil
}

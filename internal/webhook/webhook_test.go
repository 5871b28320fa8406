package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/internal/webhook"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	_ "github.com/stratus-ccm/stratus/providers/minicloud" // registers "minicloud"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// heldLease is the leader-election lease otherReplica holds while the test's
// manager runs as a standby.
const (
	heldLease    = "held-by-another-replica"
	otherReplica = "another-replica"
)

// warnings collects the admission warnings the API server relays.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings received since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// fixture is a control plane whose API server calls a stratus-ccm's webhook
// over TLS for the Services of one namespace, and the minicloud behind it.
type fixture struct {
	t        *testing.T
	kube     kubernetes.Interface
	warns    *warnings
	ns       string
	mc       *minicloudtest.Cloud
	vips     netip.Prefix
	port     int
	certFile string
	keyFile  string
	ca       []byte
	hook     string // the ValidatingWebhookConfiguration
	name     string // its webhook, as the API server's refusals name it
	mgr      *managertest.Manager
}

func newFixture(t *testing.T) *fixture {
	env := testenv.Get(t)
	f := &fixture{t: t, warns: &warnings{}, ns: env.Namespace(t)}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = f.warns
	var err error
	if f.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// A VIP range of two addresses, so that the pool can be filled.
	f.vips = netip.MustParsePrefix(fmt.Sprintf("127.%d.%d.0/30", 100+rand.IntN(100), rand.IntN(256)))
	f.mc = minicloudtest.Start(t, minicloudtest.Options{VIPCIDR: f.vips, NoDataPlane: true})
	dir := t.TempDir()
	cloudConfig := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(cloudConfig, []byte(fmt.Sprintf("url: %s\ntoken: %s\n", f.mc.URL, f.mc.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	f.certFile, f.keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	f.ca = f.writePair()
	f.port = testsupport.FreePort(t)
	f.hook = "stratus-" + f.ns
	// Another replica leads for the whole test: this one is a standby, and
	// serves the webhook all the same.
	now := metav1.NewMicroTime(time.Now())
	if _, err := f.kube.CoordinationV1().Leases(f.ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: heldLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(otherReplica), LeaseDurationSeconds: ptr.To(int32(3600)), AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.mgr = managertest.Start(t,
		"--cloud-provider=minicloud", "--cloud-config="+cloudConfig,
		"--kubeconfig="+managertest.WriteKubeconfig(t, env.Config),
		"--leader-elect-resource-namespace="+f.ns, "--leader-elect-resource-name="+heldLease,
		"--secure-port=0", "--controllers=cloud-node", "--configure-cloud-routes=false",
		"--webhooks=*", "--webhook-bind-address=127.0.0.1", "--webhook-secure-port="+strconv.Itoa(f.port),
		"--webhook-tls-cert-file="+f.certFile, "--webhook-tls-private-key-file="+f.keyFile)
	t.Cleanup(func() {
		_ = f.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), f.hook, metav1.DeleteOptions{})
	})
	return f
}

// writePair writes a new serving certificate for 127.0.0.1, signed by a new
// CA, and returns the CA bundle that verifies it.
func (f *fixture) writePair() []byte {
	f.t.Helper()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	// The key first: the watcher reloads when the certificate changes.
	if err := os.WriteFile(f.keyFile, keyPEM, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(f.certFile, certPEM, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return certPEM // the leaf and the CA that signed it
}

// register makes the API server call the webhook for the fixture's
// namespace, with the chart's match condition and the given failure policy.
func (f *fixture) register(policy admissionregistrationv1.FailurePolicyType) {
	f.t.Helper()
	// A name per policy: a refusal under that name shows the API server
	// has the new configuration.
	f.name = strings.ToLower(string(policy)) + ".service-load-balancer.stratus.io"
	url := fmt.Sprintf("https://127.0.0.1:%d%s", f.port, webhook.Path)
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: f.hook},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    f.name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: f.ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}}}},
			FailurePolicy:           &policy,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns}},
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "load-balancers-only", Expression: "object.spec.type == 'LoadBalancer'"}},
		}},
	}
	ctx := context.Background()
	hooks := f.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if old, err := hooks.Get(ctx, f.hook, metav1.GetOptions{}); err == nil {
		cfg.ResourceVersion = old.ResourceVersion
		_, err = hooks.Update(ctx, cfg, metav1.UpdateOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
	} else if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// service is a LoadBalancer Service of the fixture's namespace.
func (f *fixture) service(name string, modify ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, m := range modify {
		m(svc)
	}
	return svc
}

// create creates svc, only as a dry run when dryRun is set.
func (f *fixture) create(svc *v1.Service, dryRun bool) error {
	var opts metav1.CreateOptions
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := f.kube.CoreV1().Services(f.ns).Create(context.Background(), svc, opts)
	return err
}

// misspelt is a Service the webhook refuses whenever it is called.
func (f *fixture) misspelt() *v1.Service {
	return f.service("probe", annotate(annotations.Prefix+"load-balancer-algoritm", "source-ip"))
}

// waitRefusing waits until the API server calls the webhook of the last
// registration and the webhook refuses a misspelt annotation.
func (f *fixture) waitRefusing(what string) {
	f.t.Helper()
	testsupport.Eventually(f.t, 60*time.Second, what, func(context.Context) (bool, error) {
		err := f.create(f.misspelt(), true)
		return err != nil && strings.Contains(err.Error(), `admission webhook "`+f.name+`" denied the request`) &&
			strings.Contains(err.Error(), "did you mean "+annotations.LBAlgorithm.Name), nil
	})
}

// verifies reports whether the webhook's certificate verifies with ca.
func (f *fixture) verifies(ca []byte) bool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port)), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

func annotate(kv ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// TestWebhook runs every check through a real API server calling the
// webhook over TLS, served by a manager that is not the leader: each refuses its Service with a message naming the field
// and accepts its valid twin (and a server-side dry run answers the same);
// warnings reach the client; an update counts only the problems it adds;
// the provider's dry run consults minicloud; a rotated certificate is served
// without a restart; a stopped manager does not block writes under the
// default failure policy.
func TestWebhook(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	// Stored before the webhook was registered: invalid now, still editable.
	legacy := f.service("legacy", annotate(annotations.LBIdleTimeout.Name, "2h"))
	if err := f.create(legacy, false); err != nil {
		t.Fatal(err)
	}

	f.register(admissionregistrationv1.Fail)
	f.waitRefusing("the webhook to refuse a misspelt annotation")

	proto := func(p v1.Protocol) func(*v1.Service) { return func(s *v1.Service) { s.Spec.Ports[0].Protocol = p } }
	nodePorts := func(b bool) func(*v1.Service) {
		return func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = &b }
	}
	for _, tc := range []struct {
		name       string
		bad, valid func(*v1.Service)
		want       string // in the refusal
	}{
		{"misspelt annotation", annotate(annotations.Prefix+"load-balancer-idle-timout", "5m"), annotate(annotations.LBIdleTimeout.Name, "5m"),
			"metadata.annotations[" + annotations.Prefix + "load-balancer-idle-timout]: unknown stratus annotation; did you mean " + annotations.LBIdleTimeout.Name + "?"},
		{"value not allowed", annotate(annotations.LBAlgorithm.Name, "least-connections"), annotate(annotations.LBAlgorithm.Name, "source-ip"),
			"metadata.annotations[" + annotations.LBAlgorithm.Name + `]: invalid value "least-connections": not one of round-robin, source-ip`},
		{"out of range", annotate(annotations.LBHealthCheckInterval.Name, "10m"), annotate(annotations.LBHealthCheckInterval.Name, "10s"),
			"metadata.annotations[" + annotations.LBHealthCheckInterval.Name + `]: invalid value "10m": 10m0s is outside [1s, 5m0s]`},
		{"wrong type", annotate(annotations.LBProxyProtocol.Name, "yes"), annotate(annotations.LBProxyProtocol.Name, "true"),
			"metadata.annotations[" + annotations.LBProxyProtocol.Name + `]: invalid value "yes": not a boolean (true or false)`},
		{"timeout longer than interval",
			annotate(annotations.LBHealthCheckInterval.Name, "5s", annotations.LBHealthCheckTimeout.Name, "10s"),
			annotate(annotations.LBHealthCheckInterval.Name, "10s", annotations.LBHealthCheckTimeout.Name, "10s"),
			"metadata.annotations[" + annotations.LBHealthCheckTimeout.Name + `]: invalid value "10s": longer than ` + annotations.LBHealthCheckInterval.Name},
		{"protocol the provider lacks", proto(v1.ProtocolSCTP), proto(v1.ProtocolUDP),
			`spec.ports[0].protocol: SCTP is not supported by provider "minicloud" (supported: TCP, UDP)`},
		{"no node ports", nodePorts(false), nodePorts(true),
			`spec.allocateLoadBalancerNodePorts: false is not supported by provider "minicloud"`},
		{"requested address", func(s *v1.Service) { s.Spec.LoadBalancerIP = "127.0.0.7" }, func(*v1.Service) {},
			`spec.loadBalancerIP: provider "minicloud" allocates load balancer addresses itself: remove the field`},
		// Only minicloud knows its default interval (5 s): its dry run refuses this.
		{"dry run", annotate(annotations.LBHealthCheckTimeout.Name, "10s"), annotate(annotations.LBHealthCheckTimeout.Name, "5s"),
			`provider "minicloud" would not accept the load balancer: annotation ` + annotations.LBHealthCheckTimeout.Name + ": 10s is longer than the health-check interval (5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			for _, dryRun := range []bool{true, false} {
				err := f.create(f.service(name, tc.bad), dryRun)
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("create (dry run %v) = %v\nwant 422 Invalid containing %s", dryRun, err, tc.want)
				}
			}
			if err := f.create(f.service(name, tc.valid), false); err != nil {
				t.Errorf("valid twin refused: %v", err)
			}
		})
	}

	t.Run("unknown class is a warning", func(t *testing.T) {
		f.warns.take()
		class := "example.com/another-controller"
		if err := f.create(f.service("other-class", func(s *v1.Service) { s.Spec.LoadBalancerClass = &class }), false); err != nil {
			t.Fatalf("a class nobody here serves was refused: %v", err)
		}
		if got := strings.Join(f.warns.take(), "\n"); !strings.Contains(got, `spec.loadBalancerClass: no provider of this cloud controller manager serves "example.com/another-controller"`) {
			t.Errorf("warnings = %q; want one about the class", got)
		}
	})

	t.Run("update counts only what it adds", func(t *testing.T) {
		svc, err := f.kube.CoreV1().Services(f.ns).Get(ctx, "legacy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Labels = map[string]string{"edited": "true"}
		if svc, err = f.kube.CoreV1().Services(f.ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("an edit that adds no problem was refused: %v", err)
		}
		svc.Annotations[annotations.LBAlgorithm.Name] = "random"
		_, err = f.kube.CoreV1().Services(f.ns).Update(ctx, svc, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), annotations.LBAlgorithm.Name) || strings.Contains(err.Error(), annotations.LBIdleTimeout.Name) {
			t.Errorf("update adding a bad algorithm = %v; want a refusal naming only the algorithm", err)
		}
	})

	t.Run("dry run consults minicloud", func(t *testing.T) {
		before := f.validations()
		if err := f.create(f.service("consulted"), false); err != nil {
			t.Fatal(err)
		}
		if after := f.validations(); after <= before {
			t.Errorf("minicloud answered %d dry runs before the create and %d after; want more", before, after)
		}
		// Fill the VIP pool: the next load balancer has no address.
		var fillers []string
		for i := 0; ; i++ {
			lb, err := f.mc.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: fmt.Sprintf("filler-%d", i), Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}}})
			if err != nil {
				break
			}
			fillers = append(fillers, lb.ID)
		}
		err := f.create(f.service("no-room"), false)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `provider "minicloud" would not accept the load balancer: minicloud has no free load balancer address`) {
			t.Errorf("create with the VIP pool full = %v; want a refusal saying no address is free", err)
		}
		if err := f.mc.Client.DeleteLoadBalancer(ctx, fillers[0]); err != nil {
			t.Fatal(err)
		}
		if err := f.create(f.service("no-room"), false); err != nil {
			t.Errorf("create once an address is free: %v", err)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var count float64
		for _, mf := range families {
			if mf.GetName() != "cloud_provider_webhook_request_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "webhook" && l.GetValue() == webhook.Name {
						count += m.GetCounter().GetValue()
					}
				}
			}
		}
		if count < 20 {
			t.Errorf("cloud_provider_webhook_request_total{webhook=%q} = %v; want at least the 20 reviews above", webhook.Name, count)
		}
	})

	t.Run("certificate rotation", func(t *testing.T) {
		old := f.ca
		if !f.verifies(old) {
			t.Fatal("the webhook's certificate does not verify with the CA it was written with")
		}
		f.ca = f.writePair()
		testsupport.Eventually(t, 60*time.Second, "the webhook to serve the rotated certificate", func(context.Context) (bool, error) {
			return f.verifies(f.ca) && !f.verifies(old), nil
		})
		f.register(admissionregistrationv1.Fail) // the API server trusts only the new CA now
		f.waitRefusing("the API server to reach the webhook with the new CA")
	})

	t.Run("served by a standby", func(t *testing.T) {
		lease, err := f.kube.CoordinationV1().Leases(f.ns).Get(ctx, heldLease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != otherReplica {
			t.Errorf("lease holder %q; the manager was to stay a standby behind %q", h, otherReplica)
		}
	})

	t.Run("stopped manager does not block writes", func(t *testing.T) {
		f.register(admissionregistrationv1.Ignore)
		f.waitRefusing("the webhook to refuse under failurePolicy Ignore")
		if err := f.mgr.Stop(); err != nil {
			t.Fatalf("manager: %v", err)
		}
		if err := f.create(f.misspelt(), false); err != nil {
			t.Errorf("create with the manager stopped = %v; want it stored (failurePolicy: Ignore)", err)
		}
	})
}

// validations is how many dry runs minicloud answered.
func (f *fixture) validations() int64 {
	f.t.Helper()
	st, err := f.mc.Client.Stats(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return st.Requests["POST /v1/load-balancers/validate"]
}

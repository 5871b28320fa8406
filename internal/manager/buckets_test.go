package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// --kube-api-qps is a bucket per controller, as upstream: a controller that
// spent its burst does not delay another's requests, and the controller's
// cached client, its uncached reader and its event recorder's clientset
// share its bucket.
func TestKubeAPIBucketPerController(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	// The manager's own clients (the REST mapper's discovery) are not
	// limited here: only the controllers' buckets are under test.
	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.KubeAPIQPS, o.KubeAPIBurst = 0.001, 1 // one request, then one per 1000s
	scoped := func(name string) manager.Manager {
		m, err := o.forController(mgr, name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	nodes, services := scoped(CloudNodeController), scoped(ServiceLBController)
	// The deadline is far beyond the test; a limited request fails at once
	// because its token would come after it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	limited := func(err error) bool { return err != nil && strings.Contains(err.Error(), "rate") }

	// The node controller spends its burst with a write of its cached client.
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spent"}}
	if err := nodes.GetClient().Create(ctx, cm); err != nil {
		t.Fatalf("the node controller's first request: %v", err)
	}
	if err := nodes.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(cm), &v1.ConfigMap{}); !limited(err) {
		t.Errorf("the node controller's reader after its burst: %v, want a client rate-limit error (one bucket per controller)", err)
	}
	events, err := kubernetes.NewForConfig(nodes.GetConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); !limited(err) {
		t.Errorf("the node controller's event clientset after its burst: %v, want a client rate-limit error (its events are in its bucket)", err)
	}

	// The service controller's bucket is its own: not delayed.
	if err := services.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(cm), &v1.ConfigMap{}); err != nil {
		t.Errorf("the service controller's first request after the node controller's burst: %v", err)
	}
}

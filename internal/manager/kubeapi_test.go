package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// The manager's configuration (its informers, the providers' clients) is one
// --kube-api-qps bucket: a request of one clientset spends the tokens of every
// other made from it. Leader election has a bucket of its own; so does each
// controller (TestKubeAPIBucketPerController).
func TestKubeAPILimitIsShared(t *testing.T) {
	env := testenv.Get(t)
	o := NewOptions()
	o.KubeAPIQPS, o.KubeAPIBurst = 0.001, 1 // one request, then one per 1000s
	cfg := o.limited(env.Config)
	clientset := func(c *testing.T) kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			c.Fatal(err)
		}
		return cs
	}
	first, second := clientset(t), clientset(t)
	// The deadline is far beyond the test; a limited request fails at once
	// because its token would come after it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := first.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, err := second.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("a second clientset's request = %v, want a client rate-limit error (the bucket is shared)", err)
	}
	own, err := kubernetes.NewForConfig(ownBucket(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("a request with its own bucket (leader election): %v", err)
	}
}

// The manager's cache keeps no managed fields.
func TestCacheStripsManagedFields(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cache.New(env.Config, cacheOptions(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	name := "managed-fields-" + env.Namespace(t)
	cs := env.Clientset(t)
	created, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"a": "b"}}}, metav1.CreateOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if len(created.ManagedFields) == 0 {
		t.Fatal("the API server wrote no managed fields; the test shows nothing")
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache not synced")
	}
	var got v1.Node
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKey{Name: name}, &got) == nil, nil
	})
	if err != nil {
		t.Fatalf("node %s never reached the cache: %v", name, err)
	}
	if len(got.ManagedFields) != 0 {
		t.Errorf("cached node has %d managed-field entries, want none", len(got.ManagedFields))
	}
}

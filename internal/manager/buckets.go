package manager

import (
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// controllerManager is the manager as one controller sees it: the same cache,
// runnables and leader election, but Kubernetes API clients that share a
// --kube-api-qps/--kube-api-burst token bucket of the controller's own, as
// upstream gives each controller a clientset of its own. Its cached client,
// its uncached reader and every client made from GetConfig (the controller's
// event recorder) spend that bucket, and no other controller's.
type controllerManager struct {
	manager.Manager
	cfg    *rest.Config
	client client.Client
	reader client.Reader
}

// GetConfig returns the configuration of the controller's bucket.
func (m *controllerManager) GetConfig() *rest.Config { return m.cfg }

// GetClient returns the controller's client: reads from the manager's cache,
// writes through the controller's bucket.
func (m *controllerManager) GetClient() client.Client { return m.client }

// GetAPIReader returns the controller's uncached reader, on its bucket.
func (m *controllerManager) GetAPIReader() client.Reader { return m.reader }

// forController returns mgr as the controller name sees it, with a token bucket
// of o's --kube-api-qps and --kube-api-burst of its own.
func (o *Options) forController(mgr manager.Manager, name string) (manager.Manager, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.RateLimiter = o.newBucket()
	c, err := client.New(cfg, client.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		Cache:      &client.CacheOptions{Reader: mgr.GetCache()},
	})
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", name, err)
	}
	r, err := client.New(cfg, client.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("API reader of %s: %w", name, err)
	}
	return &controllerManager{Manager: mgr, cfg: cfg, client: c, reader: r}, nil
}

package minicloud

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// ProviderName is the name the provider registers under (--cloud-provider)
// and the scheme of its provider IDs.
const ProviderName = "minicloud"

// Tag keys the provider puts on the resources it creates.
const (
	// TagCluster carries the --cluster-name on load balancers and routes.
	TagCluster = "stratus/cluster"
	// TagServiceNamespace, TagServiceName and TagServiceUID identify the
	// Service a load balancer serves.
	TagServiceNamespace = "stratus/service-namespace"
	TagServiceName      = "stratus/service-name"
	TagServiceUID       = "stratus/service-uid"
	// TagNode carries the node name on routes.
	TagNode = "stratus/node"
)

// checkClusterName refuses a cluster name minicloud cannot store as a tag
// value, with an error naming the flag rather than the cloud's 400. The
// other tags fit by construction: namespaces and Service names are at most
// 63 bytes, UIDs 36 and node names 253.
func checkClusterName(name string) error {
	if len(name) > api.MaxTagValueLen {
		return fmt.Errorf("--cluster-name is %d bytes; minicloud tag values (tag %s) hold at most %d", len(name), TagCluster, api.MaxTagValueLen)
	}
	return nil
}

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		cfg, err := ParseConfig(r)
		if err != nil {
			return nil, err
		}
		return New(cfg)
	})
}

// Cloud is the minicloud provider: a cloudprovider.Interface with
// InstancesV2, LoadBalancer and Routes.
type Cloud struct {
	inst   *instances
	lbs    *loadBalancers
	routes *routes
	// rate and burst are the config's client-side request limit.
	rate  float64
	burst int
}

// New returns the provider for cfg, reading the token file if cfg names one.
func New(cfg *Config) (*Cloud, error) {
	token, err := cfg.ResolveToken()
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A manager's workers call concurrently; keep their connections.
	tr.MaxIdleConnsPerHost = 64
	opts := []client.Option{
		client.WithHTTPClient(&http.Client{Transport: timeoutTransport{next: countingTransport{tr}, timeout: timeout}}),
		client.WithUserAgent("stratus-minicloud-provider"),
	}
	var burst int
	if cfg.RateLimit > 0 {
		burst = cfg.Burst
		if burst == 0 {
			burst = max(1, int(math.Ceil(cfg.RateLimit)))
		}
		opts = append(opts, client.WithRateLimit(cfg.RateLimit, burst))
	}
	c, err := client.New(cfg.URL, token, opts...)
	if err != nil {
		return nil, fmt.Errorf("minicloud config: %w", err)
	}
	cloud := NewFromClient(c)
	cloud.lbs.foreignNodes = cfg.ForeignNodes
	cloud.lbs.clusterHealthCheck = cfg.ClusterHealthCheck
	cloud.lbs.pools = cfg.BackendPools
	cloud.rate, cloud.burst = cfg.RateLimit, burst
	return cloud, nil
}

// timeoutTransport bounds each request, its answer's body included, by
// timeout. A request it ends fails with a *requestTimeoutError, which is
// transient (a hung or overloaded cloud: the next try may work), while a
// request the caller cancels keeps the caller's context error: the
// caller's deadline is not the cloud's failure. (http.Client's own Timeout
// would end the request with context.DeadlineExceeded, which cannot be
// told apart from the caller's.)
type timeoutTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

// requestTimeoutError: the cloud did not answer within the timeout.
type requestTimeoutError struct{ timeout time.Duration }

func (e *requestTimeoutError) Error() string {
	return fmt.Sprintf("no answer within %s (the provider's timeout)", e.timeout)
}

// Timeout marks it as a net.Error timeout.
func (e *requestTimeoutError) Timeout() bool { return true }

// Temporary marks it as worth retrying.
func (e *requestTimeoutError) Temporary() bool { return true }

func (t timeoutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt := &requestTimeoutError{timeout: t.timeout}
	ctx, cancel := context.WithTimeoutCause(r.Context(), t.timeout, rt)
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		timedOut := context.Cause(ctx) == error(rt)
		cancel()
		if timedOut {
			return nil, rt
		}
		return nil, err
	}
	resp.Body = &timeoutBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, rt: rt}
	return resp, nil
}

// timeoutBody ends the request's timeout when the body is closed, and
// reports a read the timeout cut off as the timeout.
type timeoutBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelFunc
	rt     *requestTimeoutError
}

func (b *timeoutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && context.Cause(b.ctx) == error(b.rt) {
		err = b.rt
	}
	return n, err
}

func (b *timeoutBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// countingTransport tells stratus's request budget of every request
// (stratus.CountRequest), so that it counts what minicloud counts.
type countingTransport struct{ http.RoundTripper }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	stratus.CountRequest(r.Context())
	return t.RoundTripper.RoundTrip(r)
}

// RequestLimit is the config's rateLimit and burst (0 when it sets none):
// stratus's default request budget for this provider.
func (c *Cloud) RequestLimit() (float64, int) { return c.rate, c.burst }

// NewFromClient returns the provider using an existing minicloud client, with
// the config's defaults (other providers' nodes are not targets).
func NewFromClient(c *client.Client) *Cloud {
	inst := &instances{api: c}
	return &Cloud{inst: inst, lbs: &loadBalancers{api: c, inst: inst, foreignNodes: ForeignNodesSkip}, routes: &routes{api: c, inst: inst}}
}

// Initialize keeps a Kubernetes client so that CreateRoute can find a
// node's instance by its provider ID. It starts nothing.
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, _ <-chan struct{}) {
	if b == nil {
		return
	}
	kc, err := b.Client("minicloud-provider")
	if err != nil {
		klog.ErrorS(err, "minicloud: no Kubernetes client; routes find instances by node name only")
		return
	}
	c.routes.setNodes(kc)
}

// LoadBalancer returns the load-balancer implementation.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.lbs, true }

// Instances returns false: the provider implements InstancesV2.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 returns the instances implementation.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.inst, true }

// Zones returns false: InstancesV2 reports zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters returns false.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes returns the routes implementation.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return c.routes, true }

// ProviderName returns "minicloud".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID returns true: resources are tagged with --cluster-name.
func (c *Cloud) HasClusterID() bool { return true }

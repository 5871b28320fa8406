// Package client is the Go client of the minicloud API: a typed method for
// every endpoint, paged and all-pages listing, idempotency keys, and errors
// that tell not-found, conflict, invalid input and throttling (with the
// server's Retry-After) apart.
//
//	c, err := client.New("http://127.0.0.1:8780", token)
//	inst, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "n1", Type: "mc.small", Zone: "mc-central-a"})
//	all, err := c.ListInstances(ctx, client.ListOptions{Tags: map[string]string{"cluster": "dev"}})
//	if client.IsNotFound(err) { ... }
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// Client calls one minicloud server. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
	limiter   *rate.Limiter
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: a 30s timeout and up to 64
// idle connections).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRateLimit makes the client send at most ratePerSecond requests per
// second with bursts of burst (at least 1): a request waits for its turn, or
// fails when its context ends first. Use it to stay under the server's
// per-token limit instead of spending requests on 429 answers.
func WithRateLimit(ratePerSecond float64, burst int) Option {
	return func(c *Client) { c.limiter = rate.NewLimiter(rate.Limit(ratePerSecond), max(1, burst)) }
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8780") authenticating with token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("minicloud client: invalid base URL %q", baseURL)
	}
	if token == "" {
		return nil, fmt.Errorf("minicloud client: empty token")
	}
	// Many concurrent callers (a manager's workers) would otherwise churn
	// connections: the default keeps only 2 idle ones per host.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	c := &Client{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second, Transport: tr}, userAgent: "minicloud-go-client"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// CallOption modifies one request.
type CallOption func(*http.Request)

// WithIdempotencyKey makes a create safe to retry: a repeated create with
// the same key returns the resource the first one created.
func WithIdempotencyKey(key string) CallOption {
	return func(r *http.Request) { r.Header.Set("Idempotency-Key", key) }
}

// SummaryView asks a load balancer's GET, create or update to answer with
// the summary view (view=summary): without its targets, backend pools and
// target health. A caller that wants the state, VIP and listeners saves
// decoding thousands of targets per answer.
func SummaryView() CallOption {
	return func(r *http.Request) {
		q := r.URL.Query()
		q.Set("view", api.ViewSummary)
		r.URL.RawQuery = q.Encode()
	}
}

// ListOptions filter and page a list call.
type ListOptions struct {
	// Name selects the resource with this name (instances, load balancers).
	Name string
	// Tags selects resources having every tag; an empty value matches any
	// value of the key.
	Tags map[string]string
	// PageSize is the page size (server default 100, at most 1000).
	PageSize int
	// PageToken continues a listing from the NextPageToken of a page.
	PageToken string
	// Summary lists load balancers without their targets and target health
	// (view=summary).
	Summary bool
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Name != "" {
		q.Set("name", o.Name)
	}
	keys := make([]string, 0, len(o.Tags))
	for k := range o.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := o.Tags[k]; v != "" {
			q.Add("tag", k+"="+v)
		} else {
			q.Add("tag", k)
		}
	}
	if o.PageSize > 0 {
		q.Set("page_size", strconv.Itoa(o.PageSize))
	}
	if o.PageToken != "" {
		q.Set("page_token", o.PageToken)
	}
	if o.Summary {
		q.Set("view", api.ViewSummary)
	}
	return q
}

// do sends one request and decodes a JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any, opts ...CallOption) error {
	op := method + " " + path
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return fmt.Errorf("minicloud %s: waiting for the client-side rate limit: %w", op, err)
		}
	}
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("minicloud %s: encode request: %w", op, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("minicloud %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("minicloud %s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return fmt.Errorf("minicloud %s: read error response: %w", op, err)
		}
		return newError(op, resp, raw)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	// Streamed: a page of load balancers with thousands of targets each
	// can be tens of megabytes.
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("minicloud %s: decode response: %w", op, err)
	}
	return nil
}

func get[T any](ctx context.Context, c *Client, path string) (*T, error) {
	var out T
	if err := c.do(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func send[T any](ctx context.Context, c *Client, method, path string, in any, opts ...CallOption) (*T, error) {
	var out T
	if err := c.do(ctx, method, path, nil, in, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

func listPage[T any](ctx context.Context, c *Client, path string, o ListOptions) (*api.List[T], error) {
	var out api.List[T]
	if err := c.do(ctx, http.MethodGet, path, o.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// listAll follows next_page_token until the last page.
func listAll[T any](ctx context.Context, c *Client, path string, o ListOptions) ([]T, error) {
	var all []T
	for {
		p, err := listPage[T](ctx, c, path, o)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if p.NextPageToken == "" {
			return all, nil
		}
		o.PageToken = p.NextPageToken
	}
}

func pathOf(collection, id string) string { return collection + "/" + url.PathEscape(id) }

// Regions returns the regions and their zones.
func (c *Client) Regions(ctx context.Context) ([]api.Region, error) {
	return listAll[api.Region](ctx, c, "/v1/regions", ListOptions{})
}

// InstanceTypes returns the machine sizes.
func (c *Client) InstanceTypes(ctx context.Context) ([]api.InstanceType, error) {
	return listAll[api.InstanceType](ctx, c, "/v1/instance-types", ListOptions{})
}

// CreateInstance creates an instance; it is running when this returns.
func (c *Client) CreateInstance(ctx context.Context, in api.InstanceCreate, opts ...CallOption) (*api.Instance, error) {
	return send[api.Instance](ctx, c, http.MethodPost, "/v1/instances", in, opts...)
}

// GetInstance returns one instance.
func (c *Client) GetInstance(ctx context.Context, id string) (*api.Instance, error) {
	return get[api.Instance](ctx, c, pathOf("/v1/instances", id))
}

// ListInstancesPage returns one page of instances.
func (c *Client) ListInstancesPage(ctx context.Context, o ListOptions) (*api.List[api.Instance], error) {
	return listPage[api.Instance](ctx, c, "/v1/instances", o)
}

// ListInstances returns every instance matching o, across all pages.
func (c *Client) ListInstances(ctx context.Context, o ListOptions) ([]api.Instance, error) {
	return listAll[api.Instance](ctx, c, "/v1/instances", o)
}

// StopInstance stops an instance (state "stopped").
func (c *Client) StopInstance(ctx context.Context, id string) (*api.Instance, error) {
	return send[api.Instance](ctx, c, http.MethodPost, pathOf("/v1/instances", id)+"/stop", nil)
}

// StartInstance starts a stopped instance (state "running").
func (c *Client) StartInstance(ctx context.Context, id string) (*api.Instance, error) {
	return send[api.Instance](ctx, c, http.MethodPost, pathOf("/v1/instances", id)+"/start", nil)
}

// DeleteInstance deletes an instance; a later GetInstance is not found.
func (c *Client) DeleteInstance(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, pathOf("/v1/instances", id), nil, nil, nil)
}

// CreateLoadBalancer creates a load balancer. It starts "provisioning" and
// becomes "active" (and carries traffic) after the server's provision delay.
func (c *Client) CreateLoadBalancer(ctx context.Context, spec api.LoadBalancerSpec, opts ...CallOption) (*api.LoadBalancer, error) {
	return send[api.LoadBalancer](ctx, c, http.MethodPost, "/v1/load-balancers", spec, opts...)
}

// ValidateLoadBalancer asks whether minicloud would create the load
// balancer spec describes (or update the one holding its name), without
// changing anything: nil when it would, the error the create would get
// otherwise (IsInvalid, IsConflict when no VIP is free).
func (c *Client) ValidateLoadBalancer(ctx context.Context, spec api.LoadBalancerSpec) error {
	_, err := send[api.LoadBalancerSpec](ctx, c, http.MethodPost, "/v1/load-balancers/validate", spec)
	return err
}

// GetLoadBalancer returns one load balancer with its target health.
func (c *Client) GetLoadBalancer(ctx context.Context, id string, opts ...CallOption) (*api.LoadBalancer, error) {
	return send[api.LoadBalancer](ctx, c, http.MethodGet, pathOf("/v1/load-balancers", id), nil, opts...)
}

// ListLoadBalancersPage returns one page of load balancers.
func (c *Client) ListLoadBalancersPage(ctx context.Context, o ListOptions) (*api.List[api.LoadBalancer], error) {
	return listPage[api.LoadBalancer](ctx, c, "/v1/load-balancers", o)
}

// ListLoadBalancers returns every load balancer matching o, across all pages.
func (c *Client) ListLoadBalancers(ctx context.Context, o ListOptions) ([]api.LoadBalancer, error) {
	return listAll[api.LoadBalancer](ctx, c, "/v1/load-balancers", o)
}

// UpdateLoadBalancer replaces the listeners, targets, health check, source
// ranges and tags of a load balancer (spec.Name must be empty or unchanged).
func (c *Client) UpdateLoadBalancer(ctx context.Context, id string, spec api.LoadBalancerSpec, opts ...CallOption) (*api.LoadBalancer, error) {
	return send[api.LoadBalancer](ctx, c, http.MethodPut, pathOf("/v1/load-balancers", id), spec, opts...)
}

// DeleteLoadBalancer deletes a load balancer and closes its listeners.
func (c *Client) DeleteLoadBalancer(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, pathOf("/v1/load-balancers", id), nil, nil, nil)
}

// CreateBackendPool creates a backend pool: a named set of targets that
// load balancers share by naming it in their BackendPools.
func (c *Client) CreateBackendPool(ctx context.Context, spec api.BackendPoolSpec, opts ...CallOption) (*api.BackendPool, error) {
	return send[api.BackendPool](ctx, c, http.MethodPost, "/v1/backend-pools", spec, opts...)
}

// GetBackendPool returns one backend pool.
func (c *Client) GetBackendPool(ctx context.Context, id string) (*api.BackendPool, error) {
	return get[api.BackendPool](ctx, c, pathOf("/v1/backend-pools", id))
}

// ListBackendPoolsPage returns one page of backend pools.
func (c *Client) ListBackendPoolsPage(ctx context.Context, o ListOptions) (*api.List[api.BackendPool], error) {
	return listPage[api.BackendPool](ctx, c, "/v1/backend-pools", o)
}

// ListBackendPools returns every backend pool matching o, across all pages.
func (c *Client) ListBackendPools(ctx context.Context, o ListOptions) ([]api.BackendPool, error) {
	return listAll[api.BackendPool](ctx, c, "/v1/backend-pools", o)
}

// UpdateBackendPool replaces the tags and targets of a backend pool
// (spec.Name must be empty or unchanged). Every load balancer naming the
// pool serves the new targets once it returns.
func (c *Client) UpdateBackendPool(ctx context.Context, id string, spec api.BackendPoolSpec) (*api.BackendPool, error) {
	return send[api.BackendPool](ctx, c, http.MethodPut, pathOf("/v1/backend-pools", id), spec)
}

// DeleteBackendPool deletes a backend pool; one a load balancer names is
// refused (IsConflict).
func (c *Client) DeleteBackendPool(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, pathOf("/v1/backend-pools", id), nil, nil, nil)
}

// CreateRoute routes a CIDR to an instance.
func (c *Client) CreateRoute(ctx context.Context, in api.RouteCreate, opts ...CallOption) (*api.Route, error) {
	return send[api.Route](ctx, c, http.MethodPost, "/v1/routes", in, opts...)
}

// GetRoute returns one route.
func (c *Client) GetRoute(ctx context.Context, id string) (*api.Route, error) {
	return get[api.Route](ctx, c, pathOf("/v1/routes", id))
}

// ListRoutesPage returns one page of routes (Name is not supported).
func (c *Client) ListRoutesPage(ctx context.Context, o ListOptions) (*api.List[api.Route], error) {
	return listPage[api.Route](ctx, c, "/v1/routes", o)
}

// ListRoutes returns every route matching o, across all pages.
func (c *Client) ListRoutes(ctx context.Context, o ListOptions) ([]api.Route, error) {
	return listAll[api.Route](ctx, c, "/v1/routes", o)
}

// DeleteRoute deletes a route.
func (c *Client) DeleteRoute(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, pathOf("/v1/routes", id), nil, nil, nil)
}

// Stats returns the request counts since start or the last ResetStats.
func (c *Client) Stats(ctx context.Context) (*api.Stats, error) {
	return get[api.Stats](ctx, c, "/v1/_stats")
}

// TokenStats returns the request counts of this client's token only.
func (c *Client) TokenStats(ctx context.Context) (*api.Stats, error) {
	var out api.Stats
	if err := c.do(ctx, http.MethodGet, "/v1/_stats", url.Values{"scope": {"token"}}, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetStats zeroes the request counts (of every token).
func (c *Client) ResetStats(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/_stats/reset", nil, nil, nil)
}

// Faults returns the injected faults.
func (c *Client) Faults(ctx context.Context) (*api.Faults, error) {
	return get[api.Faults](ctx, c, "/v1/_faults")
}

// SetFaults replaces the injected faults; the zero Faults turns them off.
func (c *Client) SetFaults(ctx context.Context, f api.Faults) (*api.Faults, error) {
	return send[api.Faults](ctx, c, http.MethodPut, "/v1/_faults", f)
}

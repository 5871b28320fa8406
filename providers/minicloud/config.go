package minicloud

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultTimeout bounds each minicloud API request when the config sets no
// timeout.
const DefaultTimeout = 30 * time.Second

// maxConfigSize bounds the cloud config file (it is a handful of keys).
const maxConfigSize = 1 << 20

// Config is the provider's cloud config (the --cloud-config file):
//
//	url: http://127.0.0.1:8780       # required: the minicloud API
//	tokenFile: /etc/minicloud/token   # or token: <bearer token>; exactly one
//	timeout: 30s                      # per request; default 30s
//	foreignNodes: internalIP          # or skip (default): other providers' nodes as targets
//	clusterHealthCheck: kubeProxy     # or nodePort (default): how Cluster-policy targets are probed
//	backendPools: true                # load balancers share one backend pool (default false)
//
// Unknown keys are rejected. The token is never logged: String redacts it.
type Config struct {
	// URL is the base URL of the minicloud API (key "url").
	URL string `json:"url"`
	// Token is the bearer token (key "token").
	Token string `json:"token,omitempty"`
	// TokenFile is a file holding the bearer token (key "tokenFile"); leading
	// and trailing white space is ignored.
	TokenFile string `json:"tokenFile,omitempty"`
	// Timeout bounds each API request (key "timeout", a Go duration such as
	// "10s"). Zero means DefaultTimeout.
	Timeout time.Duration `json:"-"`
	// RateLimit caps the requests per second the provider sends (key
	// "rateLimit"; 0, the default, means no client-side limit). Set it to the
	// token's limit on the server so that requests wait their turn instead of
	// being answered 429 and retried. Burst (key "burst") is how many may go
	// at once after a quiet period (default: max(1, rateLimit)).
	RateLimit float64 `json:"-"`
	Burst     int     `json:"-"`
	// ForeignNodes says what load balancers do with backend nodes of other
	// providers (a hybrid cluster: machines from another cloud, load
	// balancers from minicloud) (key "foreignNodes"): ForeignNodesSkip, the
	// default, leaves them out; ForeignNodesInternalIP sends traffic to each
	// one's first InternalIP, for clusters where minicloud can reach them.
	ForeignNodes ForeignNodes `json:"-"`
	// ClusterHealthCheck says how the targets of a Service with
	// externalTrafficPolicy Cluster are probed (key "clusterHealthCheck"):
	// ClusterHealthCheckNodePort, the default, connects to the first TCP
	// NodePort; ClusterHealthCheckKubeProxy asks kube-proxy's /healthz on
	// port 10256, which fails when kube-proxy is down or the node is being
	// drained, so such a node leaves the pool before its traffic is lost.
	// It needs a kube-proxy on every node.
	ClusterHealthCheck ClusterHealthCheck `json:"-"`
	// BackendPools makes load balancers target one backend pool the
	// cluster's load balancers share instead of their own targets (key
	// "backendPools"; default false): stratus then sends a node change to
	// the pool in one call, whatever the number of load balancers, instead
	// of one UpdateLoadBalancer per load balancer (stratus.BackendPools).
	// An upstream manager still works: its UpdateLoadBalancer sets the
	// pool's members.
	BackendPools bool `json:"-"`
}

// ClusterHealthCheck is the value of the config key clusterHealthCheck.
type ClusterHealthCheck string

// Values of ClusterHealthCheck.
const (
	ClusterHealthCheckNodePort  ClusterHealthCheck = "nodePort"
	ClusterHealthCheckKubeProxy ClusterHealthCheck = "kubeProxy"
)

// kubeProxyHealthPort is kube-proxy's default healthz port.
const kubeProxyHealthPort = 10256

// ForeignNodes is the value of the config key foreignNodes.
type ForeignNodes string

// Values of ForeignNodes.
const (
	ForeignNodesSkip       ForeignNodes = "skip"
	ForeignNodesInternalIP ForeignNodes = "internalIP"
)

// rawConfig is the file's shape: the timeout is read as text so that its
// error can name the key.
type rawConfig struct {
	URL          string  `json:"url"`
	Token        string  `json:"token"`
	TokenFile    string  `json:"tokenFile"`
	Timeout      string  `json:"timeout"`
	RateLimit    float64 `json:"rateLimit"`
	Burst        int     `json:"burst"`
	ForeignNodes string  `json:"foreignNodes"`
	// ClusterHealthCheck is read as text so that its error names the key.
	ClusterHealthCheck string `json:"clusterHealthCheck"`
	BackendPools       bool   `json:"backendPools"`
}

// String describes the config without its token.
func (c Config) String() string {
	tok := "<none>"
	if c.Token != "" {
		tok = "<redacted>"
	}
	return fmt.Sprintf("minicloud config{url: %q, token: %s, tokenFile: %q, timeout: %s, rateLimit: %g, burst: %d, foreignNodes: %s, clusterHealthCheck: %s, backendPools: %t}", c.URL, tok, c.TokenFile, c.Timeout, c.RateLimit, c.Burst, c.ForeignNodes, c.ClusterHealthCheck, c.BackendPools)
}

// ErrNoConfig is returned when the provider gets no cloud config at all.
var ErrNoConfig = errors.New("minicloud: a cloud config is required (--cloud-config with at least url and token or tokenFile)")

// ParseConfig reads and validates a cloud config. It does not read the token
// file; ResolveToken does.
func ParseConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, ErrNoConfig
	}
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("minicloud config: read: %w", err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("minicloud config: larger than %d bytes", maxConfigSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrNoConfig
	}
	var raw rawConfig
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("minicloud config: %w", err)
	}
	cfg := &Config{URL: strings.TrimSpace(raw.URL), Token: strings.TrimSpace(raw.Token), TokenFile: strings.TrimSpace(raw.TokenFile)}
	if raw.Timeout != "" {
		d, err := time.ParseDuration(raw.Timeout)
		if err != nil {
			return nil, fmt.Errorf("minicloud config: timeout: %q is not a duration (e.g. 30s)", raw.Timeout)
		}
		if d <= 0 {
			return nil, fmt.Errorf("minicloud config: timeout: must be positive, got %s", raw.Timeout)
		}
		cfg.Timeout = d
	}
	if raw.RateLimit < 0 {
		return nil, fmt.Errorf("minicloud config: rateLimit: must not be negative, got %g", raw.RateLimit)
	}
	if raw.Burst < 0 {
		return nil, fmt.Errorf("minicloud config: burst: must not be negative, got %d", raw.Burst)
	}
	if raw.Burst > 0 && raw.RateLimit == 0 {
		return nil, errors.New("minicloud config: burst: needs rateLimit")
	}
	cfg.RateLimit, cfg.Burst, cfg.BackendPools = raw.RateLimit, raw.Burst, raw.BackendPools
	switch f := ForeignNodes(raw.ForeignNodes); f {
	case "", ForeignNodesSkip:
		cfg.ForeignNodes = ForeignNodesSkip
	case ForeignNodesInternalIP:
		cfg.ForeignNodes = f
	default:
		return nil, fmt.Errorf("minicloud config: foreignNodes: %q is neither %q nor %q", raw.ForeignNodes, ForeignNodesSkip, ForeignNodesInternalIP)
	}
	switch h := ClusterHealthCheck(raw.ClusterHealthCheck); h {
	case "", ClusterHealthCheckNodePort:
		cfg.ClusterHealthCheck = ClusterHealthCheckNodePort
	case ClusterHealthCheckKubeProxy:
		cfg.ClusterHealthCheck = h
	default:
		return nil, fmt.Errorf("minicloud config: clusterHealthCheck: %q is neither %q nor %q", raw.ClusterHealthCheck, ClusterHealthCheckNodePort, ClusterHealthCheckKubeProxy)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (c *Config) validate() error {
	if c.URL == "" {
		return errors.New("minicloud config: url: required")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("minicloud config: url: %q is not an http(s) URL", c.URL)
	}
	switch {
	case c.Token != "" && c.TokenFile != "":
		return errors.New("minicloud config: token and tokenFile: set only one")
	case c.Token == "" && c.TokenFile == "":
		return errors.New("minicloud config: token or tokenFile: one is required")
	}
	return nil
}

// ResolveToken returns the token, reading TokenFile when Token is empty.
func (c *Config) ResolveToken() (string, error) {
	if c.Token != "" {
		return c.Token, nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("minicloud config: tokenFile: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("minicloud config: tokenFile: %s is empty", c.TokenFile)
	}
	return tok, nil
}

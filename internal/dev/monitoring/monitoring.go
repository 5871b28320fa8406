// Package monitoring runs stratus's monitoring mixin (deploy/mixin) on a real
// Prometheus: it writes a Prometheus configuration that scrapes stratus-ccm
// and loads the mixin's rules rendered with the caller's settings, grants the
// scraper a token that may read /metrics, and asks the running Prometheus
// what it evaluates (queries, alerts) through its HTTP API. stratus dev
// --prometheus and the tests that drill faults use it; the process itself is
// started by the caller, which owns its lifetime.
package monitoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/deploy/mixin"
)

// Job is the job label of the stratus-ccm targets: the mixin's default
// selector, and what the chart's ServiceMonitor and PodMonitor set.
const Job = "stratus-ccm"

// Binary returns the path of the prometheus executable, or an error naming
// the Debian package that has it.
func Binary() (string, error) {
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("prometheus not found (install the Debian package prometheus): %w", err)
	}
	return p, nil
}

// Config is what Prepare writes.
type Config struct {
	// Dir holds the configuration, the rule files and the data (created).
	Dir string
	// Listen is the address Prometheus serves on (host:port).
	Listen string
	// Targets are the stratus-ccm replicas (host:port), scraped as job Job
	// over HTTPS. The serving certificate is not verified: stratus-ccm's
	// own is self-signed.
	Targets []string
	// TokenFile holds the bearer token the scrapes present (/metrics is
	// authenticated and authorized).
	TokenFile string
	// Interval is the scrape and evaluation interval (default 15s).
	Interval time.Duration
	// Mixin is merged into the mixin's _config (see mixin.Render).
	Mixin map[string]any
}

// Prepare writes Dir/prometheus.yml and the mixin's rule files and returns
// the arguments to run prometheus with.
func Prepare(cfg Config) ([]string, error) {
	if cfg.Interval == 0 {
		cfg.Interval = 15 * time.Second
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("prometheus dir: %w", err)
	}
	r, err := mixin.Render(cfg.Mixin)
	if err != nil {
		return nil, err
	}
	rules := filepath.Join(cfg.Dir, "prometheus_rules.yaml")
	alerts := filepath.Join(cfg.Dir, "prometheus_alerts.yaml")
	if err := os.WriteFile(rules, r.Rules, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(alerts, r.Alerts, 0o644); err != nil {
		return nil, err
	}
	if len(cfg.Targets) > 0 && cfg.TokenFile == "" {
		return nil, errors.New("prometheus config: the targets need a token file (/metrics is authenticated)")
	}
	promCfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     cfg.Interval.String(),
			"evaluation_interval": cfg.Interval.String(),
		},
		"rule_files": []string{rules, alerts},
		"scrape_configs": []any{map[string]any{
			"job_name":       Job,
			"scheme":         "https",
			"authorization":  map[string]any{"type": "Bearer", "credentials_file": cfg.TokenFile},
			"tls_config":     map[string]any{"insecure_skip_verify": true},
			"static_configs": []any{map[string]any{"targets": cfg.Targets}},
		}},
	}
	b, err := yaml.Marshal(promCfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.Dir, "prometheus.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--config.file=" + path,
		"--storage.tsdb.path=" + filepath.Join(cfg.Dir, "data"),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address=" + cfg.Listen,
		// Console templates are not used, and Debian's default paths
		// are those of its service.
		"--web.console.templates=" + filepath.Join(cfg.Dir, "consoles"),
		"--web.console.libraries=" + filepath.Join(cfg.Dir, "console_libraries"),
	}, nil
}

// Client asks a running Prometheus through its HTTP API.
type Client struct {
	// URL is the server's base URL (http://host:port).
	URL  string
	HTTP *http.Client
}

// NewClient returns a client of the Prometheus at base.
func NewClient(base string) *Client {
	return &Client{URL: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// Ready reports whether the server is ready to serve queries.
func (c *Client) Ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Metric map[string]string `json:"metric"`
	// Value is the sample's value as Prometheus prints it ("1", "NaN").
	Value string
}

// Query evaluates expr now and returns its series.
func (c *Client) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := c.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	out := make([]Sample, 0, len(data.Result))
	for _, r := range data.Result {
		v, _ := r.Value[1].(string)
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// Alert is an alert Prometheus holds: pending or firing.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

// Name is the alert's alertname.
func (a Alert) Name() string { return a.Labels["alertname"] }

// Alerts returns the pending and firing alerts.
func (c *Client) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := c.get(ctx, "/api/v1/alerts", &data); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return data.Alerts, nil
}

// TargetHealth is a scrape target as Prometheus last scraped it.
type TargetHealth struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
	ScrapeURL string            `json:"scrapeUrl"`
}

// Targets returns the active scrape targets.
func (c *Client) Targets(ctx context.Context) ([]TargetHealth, error) {
	var data struct {
		ActiveTargets []TargetHealth `json:"activeTargets"`
	}
	if err := c.get(ctx, "/api/v1/targets?state=active", &data); err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	return data.ActiveTargets, nil
}

// get decodes the data of a successful API answer into v.
func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

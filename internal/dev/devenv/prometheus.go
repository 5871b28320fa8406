package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/internal/dev/monitoring"
)

// PrometheusURLFile, in the state dir, holds the URL of the Prometheus that
// --prometheus started (while it runs).
const PrometheusURLFile = "prometheus/url"

// prometheusInterval is the scrape and evaluation interval of the dev
// environment's Prometheus.
const prometheusInterval = 5 * time.Second

// DevMixin are the monitoring mixin's settings in the dev environment: the
// rules evaluated every 5 s over 1-minute windows, and each alert pending
// after 10 s of its condition with "stuck" meaning 30 s, so that a drill
// (stratus dev minicloud stop) shows its alert within a minute. The
// thresholds of a real cluster are the mixin's defaults (docs/operations.md).
var DevMixin = map[string]any{
	"ruleInterval":               prometheusInterval.String(),
	"rateWindow":                 "1m",
	"lbProvisioningStuckSeconds": 30,
	"lbFailingSeconds":           30,
	"nodeUninitializedSeconds":   30,
	"leaderFlappingWindow":       "10m",
	"alertFor": map[string]any{
		"StratusCloudBudgetExhausted":          "1m",
		"StratusCloudThrottled":                "1m",
		"StratusCloudUnreachable":              "10s",
		"StratusCloudErrors":                   "30s",
		"StratusLoadBalancerProvisioningStuck": "10s",
		"StratusLoadBalancerFailing":           "10s",
		"StratusNodeDeletionBlocked":           "1m",
		"StratusNodesUninitialized":            "10s",
		"StratusNoLeader":                      "20s",
		"StratusPluginDisconnected":            "10s",
		"StratusWorkQueueGrowing":              "1m",
	},
}

// startPrometheus starts, with --prometheus, a Prometheus that scrapes the
// manager with a token allowed to read /metrics and evaluates the mixin's
// rules (DevMixin), and prints its URL. Without the prometheus binary it
// says so and starts nothing. The returned function stops it.
func (e *env) startPrometheus(ctx context.Context, cs kubernetes.Interface) (func(), error) {
	if !e.opts.Prometheus {
		return func() {}, nil
	}
	bin, err := monitoring.Binary()
	if err != nil {
		e.say("--prometheus: %v; not started", err)
		return func() {}, nil
	}
	dir := filepath.Join(e.opts.StateDir, "prometheus")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	token := filepath.Join(dir, "token")
	if err := monitoring.GrantScrapeToken(ctx, cs, token); err != nil {
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args, err := monitoring.Prepare(monitoring.Config{
		Dir:       dir,
		Listen:    listen,
		Targets:   []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.Manager))},
		TokenFile: token,
		Interval:  prometheusInterval,
		Mixin:     DevMixin,
	})
	if err != nil {
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	p, err := startProcess("prometheus", bin, args, nil, filepath.Join(e.cp.LogDir(), "prometheus.log"))
	if err != nil {
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	stop := func() { p.stop(context.WithoutCancel(ctx), stopGrace) }
	url := "http://" + listen
	if err := waitHTTP(ctx, p, &http.Client{Timeout: 2 * time.Second}, url+"/-/ready", "prometheus"); err != nil {
		stop()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(e.opts.StateDir, PrometheusURLFile), []byte(url+"\n"), 0o644); err != nil {
		stop()
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	e.say("Prometheus on %s scrapes stratus-ccm and evaluates the monitoring mixin's rules (alerts: %s/alerts; logs/prometheus.log)", url, url)
	return func() {
		stop()
		_ = os.Remove(filepath.Join(e.opts.StateDir, PrometheusURLFile))
	}, nil
}

// ReadPorts returns the ports of the dev environment in stateDir (its
// ports.json), for commands that talk to a running one.
func ReadPorts(stateDir string) (Ports, error) {
	var p Ports
	b, err := os.ReadFile(filepath.Join(stateDir, "ports.json"))
	if err != nil {
		return p, fmt.Errorf("no dev environment in %s (is `stratus dev` running?): %w", stateDir, err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", filepath.Join(stateDir, "ports.json"), err)
	}
	return p, nil
}

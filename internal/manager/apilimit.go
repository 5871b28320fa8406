package manager

import (
	"context"
	"fmt"
	"net/http"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// flowControlProbeTimeout bounds the one request that asks the API server
// whether it serves API Priority and Fairness.
const flowControlProbeTimeout = 10 * time.Second

// kubeAPILimitExplicit reports whether --kube-api-qps or --kube-api-burst
// was given on the command line.
func (o *Options) kubeAPILimitExplicit() bool {
	return o.fs != nil && (o.fs.Changed("kube-api-qps") || o.fs.Changed("kube-api-burst"))
}

// decideKubeAPILimit sets whether the manager limits its own Kubernetes API
// requests (docs/flags.md, "What --kube-api-qps limits"). With
// --kube-api-qps or --kube-api-burst given, it does, with those numbers. With
// neither, it steps aside when the API server serves API Priority and
// Fairness: the server then queues and sheds requests by priority level,
// fairly between clients, which a client-side bucket only duplicates (more
// slowly, and without knowing the server's load). When the server does not
// say so, or cannot be asked, the upstream defaults hold.
func (o *Options) decideKubeAPILimit(ctx context.Context, cfg *rest.Config) (reason string) {
	if o.kubeAPILimitExplicit() {
		return "--kube-api-qps/--kube-api-burst given"
	}
	ok, err := servesFlowControl(ctx, cfg)
	switch {
	case err != nil:
		return fmt.Sprintf("could not ask the API server whether it serves flow control (%v): the default limit holds", err)
	case !ok:
		return "the API server does not serve API Priority and Fairness: the default limit holds"
	}
	o.stepAside = true
	return "the API server serves API Priority and Fairness and neither --kube-api-qps nor --kube-api-burst is given: no client-side limit"
}

// servesFlowControl asks the API server, with one GET /version as the
// manager, whether it classifies the manager's requests with API Priority
// and Fairness: its answers then name the flow schema and priority level
// they matched.
func servesFlowControl(ctx context.Context, cfg *rest.Config) (bool, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return false, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, flowControlProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.JoinPath("version").String(), nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET /version: %s", resp.Status)
	}
	return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) != "", nil
}

// newBucket returns a token bucket of --kube-api-qps and --kube-api-burst,
// or nil when the manager stepped aside (no client-side limit).
func (o *Options) newBucket() flowcontrol.RateLimiter {
	if o.stepAside {
		return nil
	}
	return flowcontrol.NewTokenBucketRateLimiter(o.KubeAPIQPS, o.KubeAPIBurst)
}

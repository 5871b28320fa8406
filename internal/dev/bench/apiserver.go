package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
)

// managerUser is who both managers are to the API server: the service
// account a manager installed in kube-system runs as (the chart's), so that
// API Priority and Fairness classifies their requests as a cluster's
// (flow schema kube-system-service-accounts, priority level workload-high)
// instead of exempting them as it exempts system:masters.
const managerUser = "system:serviceaccount:kube-system:cloud-controller-manager"

// managerGroups are the groups of a kube-system service account.
var managerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}

// managerKubeconfig writes a kubeconfig of managerUser at path, bound to
// cluster-admin (the harness measures speed, not RBAC).
func managerKubeconfig(ctx context.Context, cp *devenv.ControlPlane, kube kubernetes.Interface, path string) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-cloud-controller-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s: %w", managerUser, err)
	}
	return cp.WriteClientKubeconfig(path, "cloud-controller-manager", managerUser, managerGroups, cp.APIServerURL(), "")
}

// apiserverSnapshot is what the API server's /metrics said at one time:
// requests it rejected (API Priority and Fairness), and the histograms of
// its request latency and of the time requests waited in its queues.
type apiserverSnapshot struct {
	rejected  float64
	latency   histogram
	queueWait histogram
}

// histogram is a Prometheus histogram summed over its series: cumulative
// counts by upper bound.
type histogram struct {
	bounds []float64
	counts []float64
}

// scrapeAPIServer reads the API server's /metrics.
func scrapeAPIServer(ctx context.Context, kube kubernetes.Interface) (apiserverSnapshot, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiserverSnapshot{}, fmt.Errorf("API server /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return apiserverSnapshot{}, fmt.Errorf("API server /metrics: %w", err)
	}
	var s apiserverSnapshot
	if f := families["apiserver_flowcontrol_rejected_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			s.rejected += m.GetCounter().GetValue()
		}
	}
	// Watches stay open for minutes: their duration is not latency.
	s.latency = sumHistogram(families["apiserver_request_duration_seconds"], func(m *dto.Metric) bool {
		return label(m, "verb") != "WATCH" && label(m, "verb") != "CONNECT"
	})
	s.queueWait = sumHistogram(families["apiserver_flowcontrol_request_wait_duration_seconds"], func(*dto.Metric) bool { return true })
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sumHistogram adds up the series of f that keep accepts.
func sumHistogram(f *dto.MetricFamily, keep func(*dto.Metric) bool) histogram {
	var h histogram
	if f == nil {
		return h
	}
	for _, m := range f.GetMetric() {
		if !keep(m) {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			i, found := slices.BinarySearch(h.bounds, b.GetUpperBound())
			if !found {
				h.bounds = slices.Insert(h.bounds, i, b.GetUpperBound())
				h.counts = slices.Insert(h.counts, i, 0)
			}
			h.counts[i] += float64(b.GetCumulativeCount())
		}
	}
	return h
}

// quantileSince returns the upper bound of the bucket that holds quantile q
// of the observations made between before and h (a histogram's resolution:
// the answer is "at most this"), or 0 when there were none.
func (h histogram) quantileSince(before histogram, q float64) float64 {
	if len(h.counts) == 0 {
		return 0
	}
	delta := make([]float64, len(h.counts))
	for i, b := range h.bounds {
		delta[i] = h.counts[i]
		if j, ok := slices.BinarySearch(before.bounds, b); ok {
			delta[i] -= before.counts[j]
		}
	}
	total := delta[len(delta)-1] // the +Inf bucket
	if total <= 0 {
		return 0
	}
	for i, c := range delta {
		if c >= q*total {
			return h.bounds[i]
		}
	}
	return math.Inf(1)
}

// API server health rows: check rows, reported for both managers without a
// ratio (a faster manager may well make the server busier while it works:
// the question is whether the server stays healthy, not who is lower).
const (
	apiRejected    = checkPrefix + "API server: requests rejected by flow control"
	apiLatencyP99  = checkPrefix + "API server: p99 request latency, ms (at most)"
	apiQueueWaitP9 = checkPrefix + "API server: p99 flow-control queue wait, ms (at most)"
)

// apiserverMetrics adds to m how the API server fared since the snapshot
// taken at the last resetCounts.
func apiserverMetrics(ctx context.Context, e *env, m Metrics) error {
	if e.apiBefore == nil {
		return nil
	}
	now, err := scrapeAPIServer(ctx, e.kube)
	if err != nil {
		return err
	}
	m[apiRejected] = now.rejected - e.apiBefore.rejected
	m[apiLatencyP99] = 1000 * now.latency.quantileSince(e.apiBefore.latency, 0.99)
	m[apiQueueWaitP9] = 1000 * now.queueWait.quantileSince(e.apiBefore.queueWait, 0.99)
	return nil
}

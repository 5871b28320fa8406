// Package upstreame2e runs a smoke of the upstream Kubernetes e2e suite's
// load-balancer tests (e2e.test at the pinned Kubernetes version, built by
// hack/kubebins) against stratus on real nodes: `stratus dev --real-nodes`
// with two nodes and stratus-ccm installed from its Helm chart. The whole
// selection, side by side with the upstream CCM, is make e2e
// (hack/e2e/run.sh, docs/e2e.md).
package upstreame2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/devenv/realnodestest"
	"github.com/stratus-ccm/stratus/internal/dev/e2ejunit"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// block is the environment's address block, apart from the other tests'
// (test/realnodes 190, internal/dev/devenv's 248 to 252, test/chaos 251 to 254) and
// from those derived from a state dir (up to 247).
const block = 246

// smoke are the upstream tests run here: a TCP load balancer with
// externalTrafficPolicy: Cluster (its traffic, with session affinity), one
// with externalTrafficPolicy: Local (its health check node port, the
// client's address), and the suite's basic TCP test, which reaches the
// Service by its name from a pod (the cluster DNS) and through its load
// balancer as its type and ports change.
var smoke = []string{
	"[sig-network] LoadBalancers [Feature:LoadBalancer] should have session affinity work for LoadBalancer service with Cluster traffic policy [LinuxOnly] [Slow]",
	"[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work for type=LoadBalancer [Slow]",
	"[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]",
}

// TestUpstreamLoadBalancerSmoke runs the smoke tests with e2e.test as make
// e2e runs it, and fails unless each of them passed.
func TestUpstreamLoadBalancerSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real nodes and the upstream e2e suite; skipped under -short")
	}
	bins, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	e2eTest := filepath.Join(bins, "e2e.test")
	if _, err := os.Stat(e2eTest); err != nil {
		t.Fatalf("the upstream e2e suite is not built (%v): run `hack/kubebins/build.sh e2e.test` (make kubebins builds it)", err)
	}
	// Fails without root; checks that nothing of the environment is left.
	env := realnodestest.Start(t, realnodestest.Options{Block: block})
	stateDir, conn := env.StateDir, env
	var last string
	err = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := conn.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 2 {
			last = fmt.Sprintf("%d nodes (%v)", len(nodes.Items), err)
			return false, nil
		}
		for _, n := range nodes.Items {
			if !initializedAndReady(n) {
				last = "node " + n.Name + " not initialized and Ready"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("both nodes initialized by stratus and Ready: %v (%s)", err, last)
	}

	// As make e2e runs the suite (hack/e2e/run.sh says why each flag).
	report := t.TempDir()
	junit := filepath.Join(report, "junit.xml")
	focus := make([]string, len(smoke))
	for i, s := range smoke {
		// Not anchored: the text ginkgo matches does not start with the
		// name --list-tests prints (an anchored focus selects nothing).
		focus[i] = regexp.QuoteMeta(s)
	}
	cmd := exec.CommandContext(t.Context(), e2eTest,
		"--kubeconfig="+filepath.Join(stateDir, "kubeconfig"),
		"--kubectl-path="+filepath.Join(bins, "kubectl"),
		"--provider=aws", "--num-nodes=2",
		"--node-schedulable-timeout=10m", "--system-pods-startup-timeout=10m", "--minStartupPods=0",
		"--dump-logs-on-failure=false", "--disable-log-dump",
		"--report-dir="+report,
		"--ginkgo.focus="+strings.Join(focus, "|"),
		"--ginkgo.junit-report="+junit,
		"--ginkgo.timeout=1h", "--ginkgo.no-color", "--ginkgo.v",
	)
	logPath := filepath.Join(report, "e2e.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	runErr := cmd.Run()
	logFile.Close()
	results, err := e2ejunit.Read(junit)
	if err != nil {
		t.Fatalf("e2e.test (%v) wrote no report: %v\n%s", runErr, err, tail(logPath, 60))
	}
	passed := map[string]bool{}
	for _, r := range results {
		t.Logf("%s: %s in %.0fs %s", r.Name, r.Outcome, r.Seconds, r.Reason)
		if r.Outcome == e2ejunit.Pass {
			passed[r.Name] = true
		}
	}
	for _, s := range smoke {
		if !passed[s] {
			t.Errorf("upstream e2e test did not pass: %s", s)
		}
	}
	if runErr != nil || t.Failed() {
		t.Errorf("e2e.test: %v; the end of its output:\n%s", runErr, tail(logPath, 120))
	}
}

// initializedAndReady says whether the manager initialized a node (no
// uninitialized taint) and its kubelet reports it Ready.
func initializedAndReady(n corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

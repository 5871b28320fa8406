package statuscmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/dev/monitoring"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	testenv.Main(m)
}

// TestReadLeaderElectedManager reads a manager running with leader election
// against a real API server (the dev environment runs without it): the Lease's
// holder, the scraped replica leading, its controllers, and a load balancer
// without backends (the cluster has no nodes) with its reason, with a token
// allowed get on /metrics.
func TestReadLeaderElectedManager(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	port := testsupport.FreePort(t)
	managertest.Start(t, "--cloud-provider="+managertest.ProviderName, "--kubeconfig="+managertest.WriteKubeconfig(t, env.Config),
		"--leader-elect-resource-namespace="+ns, "--leader-elect-resource-name=ccm", "--configure-cloud-routes=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--cert-dir="+t.TempDir())
	cs := env.Clientset(t)
	ctx := context.Background()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := monitoring.GrantScrapeToken(ctx, cs, tokenFile); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := Source{Kube: cs, MetricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", port), Token: string(token), LeaseNamespace: ns, LeaseName: "ccm"}

	var st *Status
	testsupport.EventuallyState(t, time.Minute, "status of the leading manager with its load balancer without backends", func(ctx context.Context) (bool, string) {
		st = Read(ctx, src)
		service := false
		for _, c := range st.Controllers {
			service = service || c.Name == "service"
		}
		lb := st.LoadBalancers["no_backends"] == 1 && len(st.LoadBalancerProblems) == 1 &&
			st.LoadBalancerProblems[0].Name == ns+"/web" && st.LoadBalancerProblems[0].Reason == "NoBackends"
		return st.Leader.Holder != "" && st.Leader.ScrapedLeads && service && lb && len(st.Errors) == 0,
			fmt.Sprintf("%+v", st)
	})
	if len(st.Providers) != 1 || st.Providers[0].Name != managertest.ProviderName || st.Providers[0].Down {
		t.Errorf("providers %+v, want %s up", st.Providers, managertest.ProviderName)
	}
	var out bytes.Buffer
	if err := Render(&out, st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Leader     "+st.Leader.Holder+" (lease "+ns+"/ccm renewed") {
		t.Errorf("the text does not name the leader %s and its lease:\n%s", st.Leader.Holder, out.String())
	}

	// A token that may not get /metrics: the rest is still shown, the
	// metrics named as not read.
	src.Token = "not-a-token"
	st = Read(ctx, src)
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "401") || st.Leader.Holder == "" {
		t.Errorf("with a rejected token: errors %q, leader %q; want one error naming the 401 and the leader still read", st.Errors, st.Leader.Holder)
	}
}

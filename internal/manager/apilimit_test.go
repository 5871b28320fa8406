package manager

import (
	"context"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// parsed returns Options with args parsed as the command line.
func parsed(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("stratus-ccm", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// With neither limit flag and an API server that serves API Priority and
// Fairness, the manager's clients carry no token bucket; with either flag
// given, or a server without flow control, they do.
func TestKubeAPILimitStepsAsideForFlowControl(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	limited := func(t *testing.T, o *Options) bool {
		cs, err := kubernetes.NewForConfig(o.limited(env.Config))
		if err != nil {
			t.Fatal(err)
		}
		return cs.CoreV1().RESTClient().GetRateLimiter() != nil
	}

	o := parsed(t)
	why := o.decideKubeAPILimit(ctx, env.Config)
	if !o.stepAside || limited(t, o) {
		t.Errorf("no flags, API server with flow control: stepAside %v, clients limited %v (%s); want no client-side limit", o.stepAside, limited(t, o), why)
	}
	if o.newBucket() != nil {
		t.Error("a controller's bucket exists after stepping aside")
	}

	for _, args := range [][]string{{"--kube-api-qps=20"}, {"--kube-api-burst=30"}} {
		o := parsed(t, args...)
		why := o.decideKubeAPILimit(ctx, env.Config)
		if o.stepAside || !limited(t, o) || o.newBucket() == nil {
			t.Errorf("%v: stepAside %v (%s); want the flags' limit", args, o.stepAside, why)
		}
	}

	// An API server that cannot be asked: the default limit holds.
	unreachable := rest.CopyConfig(env.Config)
	unreachable.Host = "https://127.0.0.1:1"
	o = parsed(t)
	if why := o.decideKubeAPILimit(ctx, unreachable); o.stepAside {
		t.Errorf("unreachable API server: stepped aside (%s); want the default limit", why)
	}

	noAPF, err := testenv.StartWith(map[string]string{"enable-priority-and-fairness": "false"})
	if err != nil {
		t.Fatal(err)
	}
	defer noAPF.Stop()
	if ok, err := servesFlowControl(ctx, noAPF.Config); ok || err != nil {
		t.Errorf("API server with --enable-priority-and-fairness=false: serves flow control %v, %v; want false", ok, err)
	}
	o = parsed(t)
	why = o.decideKubeAPILimit(ctx, noAPF.Config)
	if o.stepAside {
		t.Errorf("no flags, API server without flow control: stepped aside (%s); want the default limit", why)
	}
}

package minicloud

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// EnsureLoadBalancer marked "absent" creates with one request and answers
// from it; when the load balancer exists after all (here with another port),
// it takes the usual path and updates it, creating no second one.
func TestEnsureMarkedAbsent(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	if err := f.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	absent := stratus.WithLoadBalancerAbsent(ctx)
	if _, err := f.lb.EnsureLoadBalancer(absent, cluster, svc, f.nodes); !errors.As(err, new(*cloudproviderapi.RetryError)) {
		t.Fatalf("EnsureLoadBalancer = %v, want a RetryError while provisioning", err)
	}
	wantOneRequest(t, f, "POST /v1/load-balancers")

	// The mark is wrong now: the load balancer exists, with port 8080.
	svc.Spec.Ports[0].Port = 9090
	err := wait.PollUntilContextTimeout(absent, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes)
		if errors.As(err, new(*cloudproviderapi.RetryError)) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("EnsureLoadBalancer of the changed Service: %v", err)
	}
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("load balancers %+v (%v), want one", lbs, err)
	}
	if ls := lbs[0].Listeners; len(ls) != 1 || ls[0].Port != 9090 {
		t.Errorf("listeners %+v, want the new port 9090", ls)
	}
}

// A backend update of a load balancer this provider created or found costs
// one request, no lookup; when that load balancer was deleted meanwhile (the
// ID answers 404), the update looks the name up and says it does not exist.
func TestUpdateKnownLoadBalancerWithoutLookup(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	f.ensure(t, cluster, svc, f.nodes)
	if err := f.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.lb.UpdateLoadBalancer(ctx, cluster, svc, f.nodes[:1]); err != nil {
		t.Fatal(err)
	}
	wantOneRequest(t, f, "PUT /v1/load-balancers/{id}")
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 || len(lbs[0].Targets) != 1 {
		t.Fatalf("load balancers %+v (%v), want one with one target", lbs, err)
	}
	if ls := lbs[0].Listeners; len(ls) != 1 || ls[0].Port != 8080 {
		t.Errorf("listeners after the update %+v, want the Service's port 8080", ls)
	}

	if err := f.mc.Client.DeleteLoadBalancer(ctx, lbs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := f.lb.UpdateLoadBalancer(ctx, cluster, svc, f.nodes); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("update of a deleted load balancer = %v, want a \"does not exist\" error", err)
	}
}

// EnsureLoadBalancer of a Service whose load balancer's ID the provider
// knows sends the whole load balancer in one request, no lookup; when that
// load balancer was deleted meanwhile (the ID answers 404), it looks the
// name up and creates a new one.
func TestEnsureKnownLoadBalancerWithoutLookup(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	f.ensure(t, cluster, svc, f.nodes)
	before, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(before) != 1 {
		t.Fatalf("load balancers %+v (%v), want one", before, err)
	}
	if err := f.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].Port = 9090
	if _, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes); err != nil {
		t.Fatal(err)
	}
	wantOneRequest(t, f, "PUT /v1/load-balancers/{id}")
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 || lbs[0].ID != before[0].ID {
		t.Fatalf("load balancers %+v (%v), want %s alone", lbs, err, before[0].ID)
	}
	if ls := lbs[0].Listeners; len(ls) != 1 || ls[0].Port != 9090 || len(lbs[0].Targets) != 2 {
		t.Errorf("load balancer %+v, want port 9090 and both targets", lbs[0])
	}

	if err := f.mc.Client.DeleteLoadBalancer(ctx, before[0].ID); err != nil {
		t.Fatal(err)
	}
	f.ensure(t, cluster, svc, f.nodes)
	lbs, err = f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 || lbs[0].ID == before[0].ID {
		t.Fatalf("load balancers %+v (%v), want one new one", lbs, err)
	}
}

// EnsureLoadBalancerDeleted of a load balancer whose ID the provider knows
// deletes it in one request, no lookup; when that ID answers 404 (deleted
// meanwhile) it looks the name up, finds nothing, and succeeds.
func TestEnsureDeletedKnownLoadBalancerWithoutLookup(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	f.ensure(t, cluster, svc, f.nodes)
	if err := f.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	wantOneRequest(t, f, "DELETE /v1/load-balancers/{id}")
	if lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); err != nil || len(lbs) != 0 {
		t.Fatalf("load balancers %+v (%v), want none", lbs, err)
	}

	// Known, then deleted behind the provider's back.
	f.ensure(t, cluster, svc, f.nodes)
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("load balancers %+v (%v), want one", lbs, err)
	}
	if err := f.mc.Client.DeleteLoadBalancer(ctx, lbs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := f.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Errorf("EnsureLoadBalancerDeleted of a load balancer deleted meanwhile = %v, want success", err)
	}
	if st, err := f.mc.Client.TokenStats(ctx); err != nil || st.Requests["DELETE /v1/load-balancers/{id}"] != 1 || st.Requests["GET /v1/load-balancers"] != 1 {
		t.Errorf("requests %v (%v), want the delete (404) and one lookup", st.Requests, err)
	}
}

// wantOneRequest checks that the requests since the fixture's last
// ResetStats were exactly one, of kind ("PUT /v1/load-balancers/{id}").
func wantOneRequest(t *testing.T, f *lbFixture, kind string) {
	t.Helper()
	st, err := f.mc.Client.TokenStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 1 || st.Requests[kind] != 1 {
		t.Errorf("requests %v, want exactly one %s", st.Requests, kind)
	}
}

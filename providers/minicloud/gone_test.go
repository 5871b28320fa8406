package minicloud

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// emptyingFront is a reverse proxy in front of a real minicloud that, while
// empty is set, answers every unfiltered instance listing with no instances
// and no next page: a cloud whose inventory briefly comes back empty.
// Lookups of one instance and everything else pass unchanged.
type emptyingFront struct {
	*httptest.Server
	empty atomic.Bool
	hits  atomic.Int32
}

func startEmptyingFront(t *testing.T, mc *minicloudtest.Cloud) *emptyingFront {
	t.Helper()
	target, err := url.Parse(mc.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := &emptyingFront{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.empty.Load() && r.Method == http.MethodGet && r.URL.Path == "/v1/instances" && !strings.Contains(r.URL.RawQuery, "name=") {
			f.hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"items":[]}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// providerAt is the minicloud provider configured with url as the cloud's.
func providerAt(t *testing.T, mc *minicloudtest.Cloud, url string) cloudprovider.LoadBalancer {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(mc.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader(fmt.Sprintf("url: %s\ntokenFile: %s\ntimeout: 10s\n", url, tokenFile)))
	if err != nil || raw == nil {
		t.Fatalf("GetCloudProvider(%q) = %v, %v", ProviderName, raw, err)
	}
	lb, ok := raw.(*Cloud).LoadBalancer()
	if !ok {
		t.Fatal("no LoadBalancer")
	}
	return lb
}

// An update refused because a target's instance is gone leaves out only
// instances the cloud says do not exist: while the instance listing comes
// back empty, nothing is left out (the update fails and is retried, the load
// balancer keeps its targets); once the listing answers again, only the gone
// instance is left out.
func TestLoadBalancerEmptyListingLeavesOutNothing(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	first := f.nodes[:1]
	f.ensure(t, cluster, svc, first)

	// Two nodes join: node-c, and node-b whose instance is deleted meanwhile.
	c := createInstance(t, f.mc, "node-c", false)
	nodes := append(slices.Clone(f.nodes), node("node-c", ProviderID(c.ID)))
	goneID := instanceIDs(f.nodes[1:2])[0]
	if err := f.mc.Client.DeleteInstance(ctx, goneID); err != nil {
		t.Fatal(err)
	}
	front := startEmptyingFront(t, f.mc)
	lb := providerAt(t, f.mc, front.URL)

	front.empty.Store(true)
	if err := lb.UpdateLoadBalancer(ctx, cluster, svc, nodes); err == nil {
		t.Error("UpdateLoadBalancer succeeded while the instance listing came back empty; want the refusal returned")
	}
	if front.hits.Load() == 0 {
		t.Fatal("the provider never listed instances: the empty listing was not exercised")
	}
	if got, want := f.targets(t), instanceIDs(first); !slices.Equal(got, want) {
		t.Errorf("targets after an update during an empty listing = %v, want them unchanged %v", got, want)
	}

	front.empty.Store(false)
	if err := lb.UpdateLoadBalancer(ctx, cluster, svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer once the listing answers: %v", err)
	}
	if got, want := f.targets(t), instanceIDs(append(slices.Clone(first), nodes[2])); !slices.Equal(got, want) {
		t.Errorf("targets after the update = %v, want %v (only the gone %s left out)", got, want, goneID)
	}
}

// targets are the instance IDs the fixture's one load balancer targets.
func (f *lbFixture) targets(t *testing.T) []string {
	t.Helper()
	lbs, err := f.mc.Client.ListLoadBalancers(context.Background(), client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("cloud has load balancers %+v (%v), want exactly one", lbs, err)
	}
	return targetIDs(lbs[0].Targets)
}

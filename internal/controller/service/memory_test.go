package service

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// nodeRecorder is the test cloud, remembering the Node objects each Ensure
// was given.
type nodeRecorder struct {
	*testCloud
	mu   sync.Mutex
	seen map[string][]*v1.Node // node name -> the objects passed
}

func (r *nodeRecorder) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return r, true }

func (r *nodeRecorder) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	r.mu.Lock()
	for _, n := range nodes {
		r.seen[n.Name] = append(r.seen[n.Name], n)
	}
	r.mu.Unlock()
	return r.testCloud.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

// The backends handed to providers are the informer's Node objects
// themselves: every Ensure of an unchanged node gets the same object, not a
// copy made for each sync (with thousands of nodes and ten workers, the
// copies were most of the controller's memory).
func TestBackendsShareCachedNodes(t *testing.T) {
	rec := &nodeRecorder{testCloud: newTestCloud(), seen: map[string][]*v1.Node{}}
	h := start(t, rec.testCloud, cloud.Single(cloud.NewProvider("fake", rec)), Options{})
	h.createNodes(0, 2)
	for _, name := range []string{"a", "b", "c"} {
		h.createService(lbService(name))
	}
	for _, name := range []string{"a", "b", "c"} {
		h.waitIngress(name, 30*time.Second)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range h.names(0, 1) {
		objs := rec.seen[name]
		if len(objs) < 3 {
			t.Fatalf("node %s was passed %d times, want at least 3 (one Ensure per Service)", name, len(objs))
		}
		for i, o := range objs[1:] {
			if o != objs[0] && o.ResourceVersion == objs[0].ResourceVersion {
				t.Errorf("node %s: Ensure %d got a copy of the same version %s, want the cached object", name, i+2, o.ResourceVersion)
			}
		}
	}
}

package node

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus/instanceindex"
)

// refresher is the periodic address refresh of initialized nodes (upstream's
// UpdateNodeStatus loop). It runs only on the leader.
type refresher struct {
	client client.Client
	clouds *cloud.Set
	opts   Options
}

// Start refreshes at once and then every StatusUpdateFrequency after the previous
// pass ended, until ctx is done.
func (r *refresher) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("cloud-node-refresh"))
	wait.UntilWithContext(ctx, r.refresh, r.opts.StatusUpdateFrequency)
	return nil
}

// refresh runs one pass over every initialized node that a provider owns. Errors
// are logged and the node is skipped until the next pass, as upstream does.
func (r *refresher) refresh(ctx context.Context) {
	logger := log.FromContext(ctx)
	start := time.Now()
	var nodes v1.NodeList
	// The cache's own objects, not copies: the pass only reads them, and its
	// address patches go through patch.Apply, which copies.
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		logger.Error(err, "Address refresh: list nodes")
		return
	}
	byProvider := map[*cloud.Provider][]*v1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
			continue
		}
		if p := r.clouds.ForNode(n); p != nil && p.HasInstances() {
			byProvider[p] = append(byProvider[p], n)
		}
	}
	count := 0
	for p, owned := range byProvider {
		count += len(owned)
		r.refreshProvider(cloud.WithPriority(ctx, cloud.PriorityRefresh), p, owned)
	}
	logger.V(2).Info(fmt.Sprintf("Update %d nodes status took %v.", count, time.Since(start)))
}

// refreshProvider refreshes the addresses of nodes, all owned by p: from one
// instance listing when p can list, otherwise with one call per node,
// StatusUpdateWorkers at a time.
func (r *refresher) refreshProvider(ctx context.Context, p *cloud.Provider, nodes []*v1.Node) {
	logger := log.FromContext(ctx).WithValues("provider", p.Name())
	lookup := func(ctx context.Context, node *v1.Node) ([]v1.NodeAddress, error) {
		return nodeAddresses(ctx, p, node)
	}
	list, ok, err := p.ListInstances(ctx)
	switch {
	case ok && err != nil:
		logger.Error(err, "Address refresh: list instances; nodes keep their addresses until the next pass")
		return
	case ok:
		idx := instanceindex.New(list)
		lookup = func(_ context.Context, node *v1.Node) ([]v1.NodeAddress, error) {
			inst := idx.Find(node)
			if inst == nil {
				// Not ours to judge: the lifecycle controller decides about
				// missing instances.
				return nil, nil
			}
			return inst.Metadata.NodeAddresses, nil
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.StatusUpdateWorkers)
	for _, node := range nodes {
		g.Go(func() error {
			nodeLog := logger.WithValues("node", node.Name)
			cloudAddrs, err := lookup(gctx, node)
			if err != nil {
				nodeLog.Error(err, "Address refresh: get node addresses")
				return nil
			}
			addrs, changed, err := DesiredAddresses(node, cloudAddrs)
			if err != nil {
				nodeLog.Error(err, "Address refresh: skipping node")
				return nil
			}
			if !changed {
				return nil
			}
			if _, err := patchAddresses(gctx, r.client, node, addrs); err != nil {
				nodeLog.Error(err, "Address refresh")
				return nil
			}
			addressUpdates.WithLabelValues(p.Name(), "refresh").Inc()
			nodeLog.V(2).Info("Updated node addresses", "addresses", addrs)
			return nil
		})
	}
	_ = g.Wait() // every goroutine returns nil; errors are logged per node
}

// nodeAddresses asks the provider for the node's addresses alone: InstanceMetadata
// with InstancesV2; with Instances (v1) NodeAddressesByProviderID, falling back to
// NodeAddresses by name, as upstream does (instance type and zone are not
// re-fetched).
func nodeAddresses(ctx context.Context, p *cloud.Provider, node *v1.Node) ([]v1.NodeAddress, error) {
	if _, ok := p.InstancesV2(); ok {
		md, err := p.InstanceMetadata(ctx, node)
		if err != nil || md == nil {
			return nil, err
		}
		return md.NodeAddresses, nil
	}
	inst, ok := p.Instances()
	if !ok {
		return nil, fmt.Errorf("provider %s supports neither Instances nor InstancesV2", p.Name())
	}
	if node.Spec.ProviderID != "" {
		if addrs, err := inst.NodeAddressesByProviderID(ctx, node.Spec.ProviderID); err == nil {
			return addrs, nil
		}
	}
	addrs, err := inst.NodeAddresses(ctx, types.NodeName(node.Name))
	if err != nil {
		return nil, fmt.Errorf("provider %s: get addresses of node %s: %w", p.Name(), node.Name, err)
	}
	return addrs, nil
}

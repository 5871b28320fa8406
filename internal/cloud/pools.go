package cloud

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// BackendPools returns the provider's shared backend pools when the
// provider implements stratus.BackendPooler and uses them; ok is false
// otherwise (the controllers then update each load balancer's backends).
// UpdateBackendPool goes through the request budget at the context's
// priority, with the layer's retries and metrics; the other methods make no
// cloud call and pass through.
func (p *Provider) BackendPools() (pools stratus.BackendPools, ok bool) {
	bp, isPooler := p.raw.(stratus.BackendPooler)
	if !isPooler {
		return nil, false
	}
	raw, ok := bp.BackendPools()
	if !ok || raw == nil {
		return nil, false
	}
	return layeredPools{p: p, raw: raw}, true
}

// layeredPools is a provider's BackendPools through the layer.
type layeredPools struct {
	p   *Provider
	raw stratus.BackendPools
}

func (l layeredPools) PoolsOf(nodes []*v1.Node) map[string][]*v1.Node { return l.raw.PoolsOf(nodes) }

func (l layeredPools) UsesBackendPools(svc *v1.Service) bool { return l.raw.UsesBackendPools(svc) }

func (l layeredPools) UpdateBackendPool(ctx context.Context, clusterName, key string, nodes []*v1.Node) error {
	return callErr(ctx, l.p, "UpdateBackendPool", func(ctx context.Context) error {
		return l.raw.UpdateBackendPool(ctx, clusterName, key, nodes)
	})
}

package cloud

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Set is the composition of the configured providers: it decides which provider
// serves a node, a Service, and the routes. A nil result means "not ours": the
// controllers leave that object alone.
type Set struct {
	providers     []*Provider
	defaultNode   *Provider
	defaultLB     *Provider
	routes        *Provider
	classes       map[string]*Provider
	nodeOwnership map[*Provider]nodeMatcher
}

// nodeMatcher narrows which nodes of its scheme a provider owns.
type nodeMatcher func(node *v1.Node) bool

// Single returns the set for the upstream style of running one provider
// (--cloud-provider): p serves every node whose provider ID has its scheme or that
// has none yet, every LoadBalancer Service without a class, and the routes.
func Single(p *Provider) *Set {
	return &Set{
		providers:   []*Provider{p},
		defaultNode: p,
		defaultLB:   p,
		routes:      p,
		classes:     map[string]*Provider{},
	}
}

// Providers returns every provider in the set.
func (s *Set) Providers() []*Provider { return s.providers }

// ForNode returns the provider that owns node, or nil when no configured provider
// does. A node with a provider ID belongs to the provider whose ProviderName() is
// the ID's scheme (narrowed by the provider's ID prefix or node selector when
// configured); a node without one belongs to the default node provider.
func (s *Set) ForNode(node *v1.Node) *Provider {
	id := node.Spec.ProviderID
	if id == "" {
		return s.defaultNode
	}
	scheme, _, ok := strings.Cut(id, "://")
	if !ok {
		return nil
	}
	for _, p := range s.providers {
		if p.ProviderName() != scheme {
			continue
		}
		if m, ok := s.nodeOwnership[p]; ok && !m(node) {
			continue
		}
		return p
	}
	return nil
}

// ForService returns the provider that serves the load balancer of svc: the one
// mapped to its spec.loadBalancerClass, or the default load-balancer provider when
// it has no class. It returns nil for an unmapped class (another controller's).
func (s *Set) ForService(svc *v1.Service) *Provider {
	if svc.Spec.LoadBalancerClass == nil {
		return s.defaultLB
	}
	return s.classes[*svc.Spec.LoadBalancerClass]
}

// RoutesProvider returns the provider that programs routes, or nil.
func (s *Set) RoutesProvider() *Provider { return s.routes }

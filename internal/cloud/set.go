package cloud

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Set is the composition of the configured providers: it decides which provider
// serves a node, a Service, and the routes. A nil result means "not ours": the
// controllers leave that object alone.
type Set struct {
	providers   []*Provider
	byName      map[string]*Provider
	nodeRules   []nodeRule
	defaultNode *Provider
	defaultLB   *Provider
	routes      *Provider
	classes     map[string]*Provider
}

// nodeRule is a provider's claim on nodes: those whose provider ID has its scheme,
// narrowed by an ID prefix and a label selector when configured.
type nodeRule struct {
	provider *Provider
	prefix   string          // "" = any ID of the scheme
	selector labels.Selector // nil = any labels
}

// matchesLabels reports whether the node's labels satisfy the rule's selector.
func (r nodeRule) matchesLabels(node *v1.Node) bool {
	return r.selector == nil || r.selector.Matches(labels.Set(node.Labels))
}

// owns reports whether the rule claims a node with a provider ID.
func (r nodeRule) owns(node *v1.Node, scheme string) bool {
	return r.provider.ProviderName() == scheme &&
		strings.HasPrefix(node.Spec.ProviderID, r.prefix) &&
		r.matchesLabels(node)
}

// Single returns the set for the upstream style of running one provider
// (--cloud-provider): p serves every node whose provider ID has its scheme or that
// has none yet, every LoadBalancer Service without a class, and the routes.
func Single(p *Provider) *Set {
	return &Set{
		providers:   []*Provider{p},
		byName:      map[string]*Provider{p.Name(): p},
		nodeRules:   []nodeRule{{provider: p}},
		defaultNode: p,
		defaultLB:   p,
		routes:      p,
		classes:     map[string]*Provider{},
	}
}

// Providers returns every provider in the set, in configuration order.
func (s *Set) Providers() []*Provider { return s.providers }

// ProviderByName returns the provider configured under name, or nil.
func (s *Set) ProviderByName(name string) *Provider { return s.byName[name] }

// ForNode returns the provider that owns node, or nil when no configured provider
// does. A node with a provider ID belongs to the first provider (in configuration
// order) whose ProviderName() is the ID's scheme and whose provider-ID prefix and
// node selector, when configured, match the node. A node without a provider ID
// belongs to the first provider whose node selector matches it, else to the
// default node provider.
func (s *Set) ForNode(node *v1.Node) *Provider {
	id := node.Spec.ProviderID
	if id == "" {
		for _, r := range s.nodeRules {
			if r.selector != nil && r.matchesLabels(node) {
				return r.provider
			}
		}
		return s.defaultNode
	}
	scheme, _, ok := strings.Cut(id, "://")
	if !ok {
		return nil
	}
	for _, r := range s.nodeRules {
		if r.owns(node, scheme) {
			return r.provider
		}
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

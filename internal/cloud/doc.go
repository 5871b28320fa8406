// Package cloud is the layer between stratus's controllers and the cloud providers.
//
// Controllers never call a provider directly. They ask a Set which Provider serves a
// node (ForNode), a Service (ForService) or the routes (RoutesProvider), and call
// that Provider; a nil Provider means the object is not ours and must be left alone.
// Build makes a Set from a Config (the composition part of the manager
// configuration), opening each provider through k8s.io/cloud-provider's registry,
// so an upstream provider registered in init() works unchanged; FromFlags is the
// upstream --cloud-provider/--cloud-config style and Single wraps one provider.
//
// A Provider implements k8s.io/cloud-provider's Interface itself, wrapping the real
// provider with:
//
//   - the request budget: a prioritized token bucket shared by all controllers
//     (the priority of a call comes from its context, WithPriority), a cap on
//     concurrent calls, a provider-wide pause when the cloud throttles
//     (pkg/stratus.ThrottledError), and retries of throttled and transient
//     errors. api.RetryError and every other error reach the caller unchanged;
//   - the instance cache, fed by pkg/stratus.InstanceLister when the provider
//     has it, with concurrent listings coalesced; a failed listing is an error and
//     an empty one gives ErrEmptyListing, never "the instance does not exist";
//   - Prometheus metrics on controller-runtime's registry, labelled with the
//     configured provider name.
//
// docs/configuration.md is the user reference for Config and the budget.
package cloud

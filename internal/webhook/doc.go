// Package webhook is stratus-ccm's validating admission webhook for
// LoadBalancer Services: it refuses, before the Service is stored, what the
// service controller would only report later in a condition and an event.
//
// A Service is checked for its stratus annotations (the pkg/annotations
// registry: types, ranges, allowed values, keys that exclude each other,
// misspelt keys), for a loadBalancerClass this manager serves (an unknown
// class is admitted with a warning: another controller may serve it), for
// what its provider declares its load balancers can do
// (stratus.LoadBalancerCapabilities), and, when the provider offers one, by
// the provider's dry run (stratus.LoadBalancerValidator). An update is
// checked only for the problems it adds, so that a Service which became
// invalid by a configuration change can still be edited.
//
// The webhook never stands in the way: deprecated or ignored settings are
// warnings, a provider that cannot answer its dry run in time admits the
// Service with a warning, and the chart registers the webhook with
// failurePolicy: Ignore.
package webhook

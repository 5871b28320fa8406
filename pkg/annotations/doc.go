// Package annotations is the registry of stratus's own Service annotations.
//
// Every annotation stratus defines is declared here once, as a typed Key with its
// documentation, default and validation. Controllers validate a Service's stratus
// annotations in one call (Validate) before they touch the cloud, so an invalid
// value becomes a clear error naming the annotation instead of a half-applied load
// balancer; providers read the values through the typed keys. The user
// documentation, docs/annotations.md, is generated from the registry
// (`go run ./pkg/annotations/internal/gen`), and a test fails when it is stale.
//
// Annotations a provider defines for itself are the provider's business: providers
// receive the whole Service and read them directly.
package annotations

// Package cloud is the layer between stratus's controllers and the cloud providers.
//
// Controllers never call a provider directly. They ask a Set which Provider serves a
// node, a Service or the routes, and call that Provider. A Provider implements
// k8s.io/cloud-provider's Interface itself, wrapping the real provider with the
// request budget (a prioritized token bucket shared by all controllers, a cap on
// concurrent calls, retries), the instance cache fed by batched listings, and
// metrics. The priority of a call comes from its context (WithPriority).
package cloud

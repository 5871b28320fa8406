// Package plugin runs cloud providers out of process over the stratus
// provider protocol (proto/stratus/provider/v1, docs/plugins.md).
//
// A plugin is any cloudprovider.Interface served by Serve, on a Unix socket
// or over TCP with mutual TLS; `stratus-ccm plugin serve` serves a provider
// compiled into stratus by its registered name. The manager's side is Client
// (registered as the provider type "plugin"): an ordinary
// cloudprovider.Interface to the cloud layer, whose calls go to the plugin.
// A plugin that is down or restarting makes every call fail with a
// transient ErrUnavailable error, never an answer such as "instance gone";
// a plugin that breaks the protocol makes calls fail with ErrProtocol.
package plugin

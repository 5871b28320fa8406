package main

// Providers compiled into stratus-ccm. Each import registers its provider with
// k8s.io/cloud-provider in an init() block; --cloud-provider or the providers of
// --config select among them by registered name. To add a provider to a build,
// add its package here (a blank import).
import (
	_ "github.com/stratus-ccm/stratus/providers/minicloud" // registers "minicloud"
	_ "github.com/stratus-ccm/stratus/providers/openstack" // registers "openstack"
	_ "github.com/stratus-ccm/stratus/providers/vsphere"   // registers "vsphere"
)

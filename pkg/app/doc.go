// Package app builds stratus-ccm, the stratus cloud controller manager: its
// command line (every flag, which are upstream's cloud-controller-manager
// flags, every controller, leader election, logging, signal handling and
// the `plugin serve` subcommand) around the providers registered with
// k8s.io/cloud-provider in the process. It is what upstream's
// k8s.io/cloud-provider/app.NewCloudControllerManagerCommand is to the
// upstream manager.
//
// A provider author compiles a provider into the manager with a main.go of
// ten lines: the provider's package registers it in an init function, and
// Main runs the command.
//
//	package main
//
//	import (
//		"os"
//
//		"github.com/stratus-ccm/stratus/pkg/app"
//
//		_ "example.com/mycloud/provider" // registers "mycloud"
//	)
//
//	func main() { os.Exit(app.Main("v0.1.0")) }
//
// Then `main --cloud-provider=mycloud --cloud-config=...` is stratus-ccm
// for that cloud. cmd/stratus-ccm is this command with stratus's own
// providers compiled in.
//
// app is the one package under pkg/ that depends on the manager's
// implementation (internal/): it is the front door above it. Every other
// package under pkg/ depends on nothing outside pkg/ and proto/
// (docs/architecture.md draws the layers; make lint checks them).
package app

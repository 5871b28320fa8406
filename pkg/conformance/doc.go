// Package conformance checks that a cloud provider keeps the contract
// stratus and the upstream cloud-controller-manager rely on, the way
// csi-sanity does for CSI drivers.
//
// A provider author implements a Driver: the few operations the kit cannot
// do through the provider itself (create, stop, start and delete a machine
// and give the Node its kubelet would register; optionally read a load
// balancer's settings, check traffic and make the cloud fail). Run then
// builds the provider by its registered name from a cloud config and runs
// every Scenario whose needs the provider and driver meet: instances, load
// balancers, routes, the pkg/stratus extensions, and end to end
// through stratus's controllers on a real control plane. Each scenario
// passes, fails with what was expected and what came, or is skipped with
// the reason. WriteTable and WriteJUnit render the Report.
//
//	rep, err := conformance.Run(ctx, conformance.Config{
//		Provider:    "mycloud",
//		CloudConfig: cfg,
//		Driver:      myDriver,
//		KubeConfig:  restConfig,
//		Manager:     app.Manager{}, // pkg/app: stratus-ccm, for the end-to-end scenarios
//	})
//
// `stratus conformance` runs the same kit from the command line for the
// drivers registered with RegisterDriver (minicloud and the simulated
// vCenter ship with stratus). See docs/conformance.md.
package conformance

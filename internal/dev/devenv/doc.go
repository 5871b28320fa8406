// Package devenv runs stratus on a local cluster and cloud: the `stratus dev`
// command. It starts etcd, kube-apiserver and kube-controller-manager as real
// processes (ControlPlane), minicloud in-process (stopped and started on
// demand through a control socket, Control), the stratus-ccm manager
// as a child process restarted when it exits, and one simulated kubelet (Kubelet) per minicloud instance
// tagged stratus-dev=node. A kubelet registers its Node as a kubelet with
// --cloud-provider=external does, keeps it Ready with heartbeats while its
// instance runs, and stands in for kube-proxy and a backend pod by answering
// HTTP on every LoadBalancer Service's NodePort at its instance's private IP.
// NodePorts does the same for many kubelets with one listener per port (the
// chaos run's hundreds of nodes); stratus dev keeps a listener per kubelet.
//
// With Options.Cloud CloudOpenStack minicloud also serves its OpenStack
// dialect (package minicloud/openstack) and the manager runs the openstack
// provider with a cloud.conf written from the dialect's Neutron IDs: the same
// instances and kubelets, with Octavia load balancers and floating IPs.
//
// With Options.Cloud CloudVSphere the machines are the VMs of a simulated
// vCenter (vcsim) in the same process, with its control API for
// `stratus vcsim vm`: one kubelet per powered-on VM, named after it and
// reporting its system UUID, answers on the loopback counterpart of the VM's
// address, which minicloud's load balancers reach as a peer network. The
// manager then runs two providers: vsphere for nodes, minicloud for load
// balancers.
//
// Everything lives under one state directory, so a second start reuses the
// cluster and the cloud; every child process is stopped (and killed if it
// does not stop) when the context given to Run is done.
package devenv

// Command pause is the sandbox process of every pod on the dev environment's
// real nodes, packaged as the image the kubelet asks for
// (registry.k8s.io/pause): it holds the pod's namespaces open, reaps the
// children it inherits as the pod's first process, and exits on SIGINT or
// SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

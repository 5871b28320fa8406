// Command coredns is CoreDNS at the version this module pins, with only the
// plugins the real nodes' cluster DNS uses: the kubernetes plugin serving
// cluster.local from the API server, and the health, readiness, error,
// cache and load-balancing plugins of the usual kube-dns Corefile. There is
// no forward plugin: no name lookup may leave this machine, so names outside
// the cluster's zones get no answer from upstream servers.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}

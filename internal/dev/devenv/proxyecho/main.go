// Command proxyecho is a pod of the dev environment's real nodes that shows
// what a load balancer with the PROXY protocol delivers: on every TCP
// connection to :8080 it reads a PROXY protocol v2 header and answers with
// the client address the header carries ("client 127.0.0.1:40312"), then
// closes; a connection without a valid header gets the error instead.
package main

import (
	"fmt"
	"log"
	"net"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/dataplane"
)

func main() {
	ln, err := net.Listen("tcp", ":8080")
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			src, err := dataplane.ReadProxyHeader(c)
			if err != nil {
				fmt.Fprintf(c, "error %v\n", err)
				return
			}
			fmt.Fprintf(c, "client %s\n", src)
		}()
	}
}

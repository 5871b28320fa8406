package client_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	dir, _ := os.MkdirTemp("", "minicloud-example")
	defer os.RemoveAll(dir)

	// An in-process minicloud; tests use minicloudtest.Start instead.
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = dir
	cfg.Tokens = []string{"secret"}
	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	c, _ := client.New("http://"+ln.Addr().String(), "secret")
	inst, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "node-1", Type: "mc.small", Zone: "mc-central-a"},
		client.WithIdempotencyKey("create-node-1"))
	if err != nil {
		panic(err)
	}
	fmt.Println(inst.Name, inst.State, inst.Zone)

	_, err = c.CreateInstance(ctx, api.InstanceCreate{Name: "node-1", Type: "mc.small", Zone: "mc-central-a"})
	fmt.Println("second node-1 conflicts:", client.IsConflict(err))

	all, _ := c.ListInstances(ctx, client.ListOptions{Name: "node-1"})
	fmt.Println(len(all), "instance named node-1")

	_ = c.DeleteInstance(ctx, inst.ID)
	_, err = c.GetInstance(ctx, inst.ID)
	fmt.Println("gone:", client.IsNotFound(err))
	// Output:
	// node-1 running mc-central-a
	// second node-1 conflicts: true
	// 1 instance named node-1
	// gone: true
}

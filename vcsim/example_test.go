package vcsim_test

import (
	"context"
	"fmt"
	"log"

	"github.com/vmware/govmomi/vim25/mo"

	"github.com/stratus-ccm/stratus/vcsim"
)

func Example() {
	ctx := context.Background()
	s, err := vcsim.Start(ctx, vcsim.Options{VMs: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, name := range s.Nodes() {
		vm, err := s.VM(ctx, name)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(vm.Name, vm.Zone, vm.Region, vm.Guest.Hostname, vm.Guest.NICs[0].Network, vm.Guest.NICs[0].IPs)
	}

	// A client, as a provider would make one from s.URL(), s.CAFile() and
	// the credentials.
	c, err := s.Client(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.PowerOff(ctx, "node-1"); err != nil {
		log.Fatal(err)
	}
	vm, _ := s.VM(ctx, "node-1")
	var seen mo.VirtualMachine
	if err := c.RetrieveOne(ctx, vm.Ref, []string{"runtime.powerState"}, &seen); err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-1:", seen.Runtime.PowerState)
	r := s.Requests()
	fmt.Println("logins:", r.SOAP["Login"], "retrieves:", r.SOAP["RetrievePropertiesEx"])
	// Output:
	// node-0 zone-a region-1 node-0 VM Network [10.0.0.1]
	// node-1 zone-b region-1 node-1 VM Network [10.0.0.2]
	// node-1: poweredOff
	// logins: 1 retrieves: 1
}

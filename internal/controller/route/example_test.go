package route_test

import (
	"fmt"

	"k8s.io/cloud-provider/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/route"
)

func ExampleParseClusterCIDRs() {
	cidrs, err := route.ParseClusterCIDRs("10.244.0.0/16,fd00:10:244::/56")
	fmt.Println(cidrs, err)
	_, err = route.ParseClusterCIDRs("10.244.0.0/16,10.245.0.0/16")
	fmt.Println(err)
	// Output:
	// [10.244.0.0/16 fd00:10:244::/56] <nil>
	// --cluster-cidr: two CIDRs must be a dual-stack pair (one IPv4, one IPv6), got 10.244.0.0/16 and 10.245.0.0/16
}

// The manager wires the controller from the upstream flags like this.
func ExampleAdd() {
	mgr, err := manager.New(config.GetConfigOrDie(), manager.Options{})
	if err != nil {
		panic(err)
	}
	cidrs, err := route.ParseClusterCIDRs("10.244.0.0/16") // --cluster-cidr
	if err != nil {
		panic(err)
	}
	clouds := cloud.Single(cloud.NewProvider("fake", &fake.Cloud{}))
	started, err := route.Add(mgr, clouds, route.Options{ClusterName: "prod", ClusterCIDRs: cidrs})
	fmt.Println(started, err)
}

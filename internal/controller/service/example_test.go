package service_test

import (
	"log"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/service"
)

// The manager binary builds the provider set from its configuration, adds the
// service controller with the flag values, and runs the manager.
func ExampleAdd() {
	mgr, err := manager.New(config.GetConfigOrDie(), manager.Options{LeaderElection: true, LeaderElectionID: "cloud-controller-manager"})
	if err != nil {
		log.Fatal(err)
	}
	clouds, err := cloud.Build(cloud.FromFlags("minicloud", "/etc/stratus/cloud.conf"))
	if err != nil {
		log.Fatal(err)
	}
	started, err := service.Add(mgr, clouds, service.Options{
		Workers:     20,        // --concurrent-service-syncs
		ClusterName: "prod-eu", // --cluster-name
	})
	if err != nil {
		log.Fatal(err)
	}
	if !started {
		log.Print("no provider supports load balancers")
	}
}

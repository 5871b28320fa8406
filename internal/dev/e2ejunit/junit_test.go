package e2ejunit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	got, err := Read("testdata/junit.xml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work for type=LoadBalancer [Slow]", Outcome: Pass, Seconds: 27.29},
		{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]", Outcome: Fail, Reason: "Interrupted by User", Seconds: 102.93},
		{Name: "[sig-network] Services should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer", Outcome: Fail, Reason: "failed to get a response", Seconds: 60.5},
		{Name: "[sig-apps] Deployment should not disrupt a cloud load-balancer's connectivity during rollout [Provider:aws,azure,gce]", Outcome: Skip, Reason: "load-balancer test requires at least 3 schedulable nodes", Seconds: 0.5},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Read (-want +got):\n%s", d)
	}
}

package service

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLoadBalancerState(t *testing.T) {
	created := metav1.Unix(100, 0)
	changed := metav1.Unix(200, 0)
	for _, tc := range []struct {
		reason    string // "" for no condition
		want      string
		wantSince metav1.Time
	}{
		{"", stateProvisioning, created},
		{ReasonProvisioning, stateProvisioning, changed},
		{ReasonReady, stateReady, changed},
		{ReasonNoBackends, stateNoBackends, changed},
		{ReasonCloudError, stateFailing, changed},
		{ReasonInvalidConfiguration, stateInvalid, changed},
	} {
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
		if tc.reason != "" {
			svc.Status.Conditions = []metav1.Condition{{Type: ConditionLoadBalancerReady, Reason: tc.reason, LastTransitionTime: changed}}
		}
		if got, since := LoadBalancerState(svc); got != tc.want || !since.Equal(&tc.wantSince) {
			t.Errorf("reason %q: %s since %v, want %s since %v", tc.reason, got, since, tc.want, tc.wantSince)
		}
	}
}

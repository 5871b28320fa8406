package manager

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// TestNodeLifecycleSettings: the deletion budget is configurable, invalid values
// name the field, and the confirmation interval follows the slowest cache.
func TestNodeLifecycleSettings(t *testing.T) {
	base := "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\n"
	cfg, err := ParseConfig([]byte(base + "nodeLifecycle:\n  deletionBudgetPercent: 25\n  deletionBudgetMin: 2\n  deletionBudgetWindow: 5m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if nl := cfg.NodeLifecycle; nl.DeletionBudgetPercent != 25 || nl.DeletionBudgetMin != 2 || nl.DeletionBudgetWindow.Duration != 5*time.Minute {
		t.Fatalf("nodeLifecycle = %+v", nl)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"nodeLifecycle:\n  deletionBudgetPercent: 101\n", "nodeLifecycle.deletionBudgetPercent"},
		{"nodeLifecycle:\n  deletionBudgetMin: -1\n", "nodeLifecycle.deletionBudgetMin"},
		{"nodeLifecycle:\n  deletionBudgetWindow: -1m\n", "nodeLifecycle.deletionBudgetWindow"},
	} {
		if _, err := ParseConfig([]byte(base + bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err = %v, want one naming %s", bad.yaml, err, bad.want)
		}
	}
	ten := &metav1.Duration{Duration: 10 * time.Second}
	ninety := &metav1.Duration{Duration: 90 * time.Second}
	for _, c := range []struct {
		providers []cloud.ProviderConfig
		want      time.Duration
	}{
		{nil, 0},
		{[]cloud.ProviderConfig{{InstanceCacheFreshness: ten}}, 10 * time.Second},
		{[]cloud.ProviderConfig{{InstanceCacheFreshness: ten}, {}}, cloud.DefaultInstanceCacheFreshness},
		{[]cloud.ProviderConfig{{InstanceCacheFreshness: ninety}, {}}, 90 * time.Second},
	} {
		if got := longestCacheFreshness(c.providers); got != c.want {
			t.Errorf("longestCacheFreshness(%v) = %s, want %s", c.providers, got, c.want)
		}
	}
}

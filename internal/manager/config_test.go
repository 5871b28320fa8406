package manager_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/manager"
	_ "github.com/stratus-ccm/stratus/internal/manager/managertest" // registers the "fake" provider
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr []string
		check   func(t *testing.T, c *manager.Config)
	}{
		{
			name: "full",
			yaml: `apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
providers:
- name: a
  type: fake
  loadBalancerClasses: [example.com/lb]
defaultNodeProvider: a
defaultLoadBalancerProvider: a
routesProvider: a
shutdownGracePeriod: 45s
service:
  nodeUpdateWindow: 2s
  orphanGracePeriod: 1m
route:
  resyncPeriod: 3m
  maxConcurrentOps: 10
`,
			check: func(t *testing.T, c *manager.Config) {
				if len(c.Providers) != 1 || c.Providers[0].Type != "fake" || c.Providers[0].LoadBalancerClasses[0] != "example.com/lb" {
					t.Errorf("providers = %+v", c.Providers)
				}
				if c.ShutdownGracePeriod.Duration != 45*time.Second || c.Service.NodeUpdateWindow.Duration != 2*time.Second ||
					c.Route.ResyncPeriod.Duration != 3*time.Minute || c.Route.MaxConcurrentOps != 10 || c.RoutesProvider != "a" {
					t.Errorf("settings = %+v", c)
				}
			},
		},
		{
			name: "settings only",
			yaml: "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nshutdownGracePeriod: 10s\n",
		},
		{name: "unknown field", yaml: "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nprovidrs: []\n", wantErr: []string{"providrs"}},
		{name: "duplicate field", yaml: "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nkind: ManagerConfig\n", wantErr: []string{"kind"}},
		{name: "wrong version", yaml: "apiVersion: stratus.io/v1\nkind: ManagerConfig\n", wantErr: []string{"apiVersion"}},
		{name: "wrong kind", yaml: "apiVersion: stratus.io/v1alpha1\nkind: Config\n", wantErr: []string{"kind"}},
		{name: "negative duration", yaml: "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nservice:\n  orphanGracePeriod: -1s\n", wantErr: []string{"service.orphanGracePeriod"}},
		{name: "negative ops", yaml: "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nroute:\n  maxConcurrentOps: -2\n", wantErr: []string{"route.maxConcurrentOps"}},
		{
			name:    "unregistered provider type",
			yaml:    "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nproviders:\n- name: a\n  type: nope\n",
			wantErr: []string{"providers[0].type"},
		},
		{name: "not yaml", yaml: "\t{", wantErr: []string{"yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := manager.ParseConfig([]byte(tc.yaml))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ParseConfig: %v", err)
				}
				if tc.check != nil {
					tc.check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatal("ParseConfig accepted the file")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestParseConfigDecodeErrorsNameThePath: a value that does not decode is
// reported under its YAML path, in the stratus settings and in the provider
// composition alike, never in Go's spelling.
func TestParseConfigDecodeErrorsNameThePath(t *testing.T) {
	const head = "apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string // whole lines of the error
	}{
		{"duration unit", "route: {resyncPeriod: 1x}\n", []string{
			`route.resyncPeriod: invalid duration "1x": time: unknown unit "x" in duration "1x"`,
		}},
		{"duration of the wrong type", "service: {orphanGracePeriod: 5}\n", []string{
			`service.orphanGracePeriod: want a duration such as "30s", got 5`,
		}},
		{"integer of the wrong type", "route: {maxConcurrentOps: many}\nshutdownGracePeriod: forever\n", []string{
			`route.maxConcurrentOps: want an integer from -9223372036854775808 to 9223372036854775807, got "many"`,
			`shutdownGracePeriod: invalid duration "forever": time: invalid duration "forever"`,
		}},
		{"unknown nested field", "nodeLifecycle: {deletionBudget: 3}\n", []string{
			`nodeLifecycle.deletionBudget: unknown field`,
		}},
		{
			name: "provider composition",
			yaml: "providers:\n- {name: a, type: fake}\n- name: b\n  type: fake\n  instanceCacheFreshness: 1x\n  budget: {rate: fast, burst: 1.5}\n  loadBalancerClasses: example.com/lb\n",
			want: []string{
				`providers[1].budget.burst: want an integer from -9223372036854775808 to 9223372036854775807, got 1.5`,
				`providers[1].budget.rate: want a number, got "fast"`,
				`providers[1].instanceCacheFreshness: invalid duration "1x": time: unknown unit "x" in duration "1x"`,
				`providers[1].loadBalancerClasses: want a list, got "example.com/lb"`,
			},
		},
		{"provider selector", "providers:\n- {name: a, type: fake, nodeSelector: {matchLabels: {region: [a]}}}\n", []string{
			`providers[0].nodeSelector.matchLabels.region: want a string, got a list`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manager.ParseConfig([]byte(head + tc.yaml))
			if err == nil {
				t.Fatal("ParseConfig accepted the file")
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("error lines:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stratus.yaml")
	if err := os.WriteFile(path, []byte("kind: Nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := manager.LoadConfig(path)
	if !errors.Is(err, manager.ErrConfig) || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadConfig = %v, want manager.ErrConfig naming %s", err, path)
	}
	if _, err := manager.LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, manager.ErrConfig) {
		t.Fatalf("missing file: %v, want manager.ErrConfig", err)
	}
}

// FuzzParseConfig: no input panics, an accepted file survives validation
// again (ParseConfig is deterministic), and a rejected one is never rejected in
// the JSON decoder's words (no path, or Go's spelling of it).
func FuzzParseConfig(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/config/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := manager.ParseConfig(data)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "error unmarshaling JSON") || strings.Contains(msg, "Go struct field") {
				t.Fatalf("ParseConfig error does not name the YAML path: %v", err)
			}
			return
		}
		again, err := manager.ParseConfig(data)
		if err != nil || again.APIVersion != c.APIVersion || len(again.Providers) != len(c.Providers) {
			t.Fatalf("ParseConfig is not deterministic: %v", err)
		}
	})
}

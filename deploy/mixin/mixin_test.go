package mixin_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/deploy/mixin"
)

// root is the repository root, from this package's directory.
const root = "../.."

// TestGeneratedIsCurrent renders the mixin and fails when a committed file
// differs: run make generate after changing a .libsonnet file.
func TestGeneratedIsCurrent(t *testing.T) {
	files, err := mixin.Generated()
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range files {
		have, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s is not current (run make generate): %v", p, err)
		}
	}
}

// promtool returns the path of promtool, or fails the test naming the
// package that has it (skipped only with -short).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed; skipped only under -short")
		}
		t.Fatalf("promtool not found (%v): install the Debian package prometheus (hack/ci-packages.txt lists it)", err)
	}
	return p
}

// TestPromtoolCheckRules checks the committed rule files with promtool.
func TestPromtoolCheckRules(t *testing.T) {
	bin := promtool(t)
	out, err := exec.Command(bin, "check", "rules",
		"generated/prometheus_rules.yaml", "generated/prometheus_alerts.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestPromtoolTestRules runs the alerts' unit tests (tests/alerts_test.yaml)
// on the committed rule files.
func TestPromtoolTestRules(t *testing.T) {
	bin := promtool(t)
	out, err := exec.Command(bin, "test", "rules", "tests/alerts_test.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func alertNames(t *testing.T) []string {
	t.Helper()
	var f ruleFile
	readYAML(t, "generated/prometheus_alerts.yaml", &f)
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	if len(names) == 0 {
		t.Fatal("no alerts in generated/prometheus_alerts.yaml")
	}
	return names
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestEveryAlertIsTested: each alert has a unit test in which it fires and
// one in which it stays quiet.
func TestEveryAlertIsTested(t *testing.T) {
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, "tests/alerts_test.yaml", &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, name := range alertNames(t) {
		if !fires[name] {
			t.Errorf("alert %s: no test in tests/alerts_test.yaml where it fires", name)
		}
		if !quiet[name] {
			t.Errorf("alert %s: no test in tests/alerts_test.yaml where it stays quiet", name)
		}
	}
}

// TestEveryAlertHasARunbook: each alert's runbook_url points at a section of
// docs/operations.md named after it, with the four parts every runbook has.
func TestEveryAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	heading := regexp.MustCompile(`(?m)^### (Stratus\w+)$`)
	idx := heading.FindAllSubmatchIndex(doc, -1)
	for i, m := range idx {
		end := len(doc)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		sections[string(doc[m[2]:m[3]])] = string(doc[m[1]:end])
	}
	var f ruleFile
	readYAML(t, "generated/prometheus_alerts.yaml", &f)
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			if want := "docs/operations.md#" + strings.ToLower(r.Alert); !strings.HasSuffix(url, want) {
				t.Errorf("alert %s: runbook_url %q does not end in %s", r.Alert, url, want)
			}
			body, ok := sections[r.Alert]
			if !ok {
				t.Errorf("alert %s: no section \"### %s\" in docs/operations.md", r.Alert, r.Alert)
				continue
			}
			for _, part := range []string{"**Meaning.**", "**Confirm.**", "**Act.**", "**Threshold.**"} {
				if !strings.Contains(body, part) {
					t.Errorf("alert %s: its runbook in docs/operations.md has no %s part", r.Alert, part)
				}
			}
		}
	}
	for name := range sections {
		if !slices.Contains(alertNames(t), name) {
			t.Errorf("docs/operations.md has a runbook for %s, which is no alert of the mixin", name)
		}
	}
}

// TestRenderOverrides: the settings tests and stratus dev pass reach the
// rules (a nested key is merged, not replacing its object).
func TestRenderOverrides(t *testing.T) {
	r, err := mixin.Render(map[string]any{
		"ruleInterval": "2s",
		"alertFor":     map[string]any{"StratusCloudUnreachable": "3s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Interval string `json:"interval"`
			Rules    []struct {
				Alert string `json:"alert"`
				For   string `json:"for"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(r.Alerts, &f); err != nil {
		t.Fatal(err)
	}
	fors := map[string]string{}
	for _, g := range f.Groups {
		if g.Interval != "2s" {
			t.Errorf("group interval %q, want 2s", g.Interval)
		}
		for _, r := range g.Rules {
			fors[r.Alert] = r.For
		}
	}
	if fors["StratusCloudUnreachable"] != "3s" || fors["StratusCloudThrottled"] != "15m" {
		t.Errorf("for: StratusCloudUnreachable %q (want 3s), StratusCloudThrottled %q (want the default 15m)",
			fors["StratusCloudUnreachable"], fors["StratusCloudThrottled"])
	}
}

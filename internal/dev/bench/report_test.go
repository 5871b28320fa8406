package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRatios(t *testing.T) {
	for _, tc := range []struct {
		name         string
		up, st, want Metrics
	}{
		{"stratus ahead", Metrics{"calls": 300}, Metrics{"calls": 100}, Metrics{"calls": 3}},
		{"stratus behind", Metrics{"rss": 50}, Metrics{"rss": 100}, Metrics{"rss": 0.5}},
		{"rounded to two places", Metrics{"s": 1}, Metrics{"s": 3}, Metrics{"s": 0.33}},
		{"zero for stratus has no ratio", Metrics{"calls": 5}, Metrics{"calls": 0}, Metrics{}},
		{"metric on one side only", Metrics{"a": 1}, Metrics{"b": 1}, Metrics{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ratios(tc.up, tc.st)); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestMarkdownSaysWhereStratusIsBehind(t *testing.T) {
	r := &Report{Scenarios: []Result{
		{Name: "memory", Params: map[string]any{"nodes": 5}, Upstream: Metrics{"peakRSSMiB": 50}, Stratus: Metrics{"peakRSSMiB": 100}, Ratio: Metrics{"peakRSSMiB": 0.5}},
		{Name: "lb-burst", Params: map[string]any{}, Errors: map[string]string{"stratus": "boom"}},
		{Name: "scale-ladder", Params: map[string]any{}, Upstream: Metrics{"kubeAPIRequestsPerHour": 40}, Stratus: Metrics{"kubeAPIRequestsPerHour": 0}, Ratio: Metrics{}},
		{Name: "node-churn", Params: map[string]any{}, Upstream: Metrics{"cloudCalls GET": 80}, Stratus: Metrics{"cloudCalls PUT": 200}, Ratio: Metrics{}},
		{Name: "steady-state", Params: map[string]any{}, Upstream: Metrics{"cloudCalls": 8}, Errors: map[string]string{"stratus": "timed out"}},
		{Name: "node-init-burst", Params: map[string]any{}, Upstream: Metrics{"cloudCalls": 9}},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| memory | nodes=5 | peakRSSMiB | 50 | 100 | 0.50 | **stratus behind** |",
		"| lb-burst |  | — | — | — | — | failed: stratus: boom |",
		"| scale-ladder |  | kubeAPIRequestsPerHour | 40 | 0 | — | stratus 0, upstream not |",
		"| node-churn |  | cloudCalls GET | 80 | — | — | none by stratus |",
		"| node-churn |  | cloudCalls PUT | — | 200 | — | none by upstream |",
		"| steady-state |  | cloudCalls | 8 | — | — | one side has no number: stratus: timed out |",
		"| node-init-burst |  | cloudCalls | 9 | — | — | stratus not run |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

func TestWriteChartDrawsAPNG(t *testing.T) {
	r := &Report{Scenarios: []Result{
		{Name: "memory", Ratio: Metrics{"peakRSSMiB": 0.5}},
		{Name: "steady-state", Ratio: Metrics{"cloudCallsPerHour": 12, "cloudCallsPerHour GET /v1/instances": 30}},
	}}
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := r.WriteChart(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG", path)
	}
	if err := (&Report{}).WriteChart(path); err == nil {
		t.Error("a report without ratios drew a chart")
	}
}

func TestMergeReplacesRerunScenariosAndKeepsOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "all.json")
	old := &Report{Scenarios: []Result{
		{Name: "node-init-burst", Stratus: Metrics{"cloudCalls": 7}},
		{Name: "memory", Stratus: Metrics{"peakRSSMiB": 1}},
	}}
	if err := old.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	all, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	all.Merge(&Report{Scenarios: []Result{
		{Name: "memory", Stratus: Metrics{"peakRSSMiB": 2}},
		{Name: "lb-burst", Stratus: Metrics{"cloudCalls": 3}},
	}})
	var got []string
	for _, r := range all.Scenarios {
		got = append(got, r.Name)
	}
	if d := cmp.Diff([]string{"node-init-burst", "memory", "lb-burst"}, got); d != "" {
		t.Errorf("scenarios (-want +got):\n%s", d)
	}
	if all.Scenarios[0].Stratus["cloudCalls"] != 7 || all.Scenarios[1].Stratus["peakRSSMiB"] != 2 {
		t.Errorf("merged results: %+v", all.Scenarios)
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("ReadReport of a missing file succeeded")
	}
}

func TestRatioTicksLabelRatios(t *testing.T) {
	var got []string
	for _, tk := range (ratioTicks{}).Ticks(-1, 1) {
		got = append(got, tk.Label)
	}
	want := []string{"1/10", "1/5", "1/2", "1", "2", "5", "10"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tick labels (-want +got):\n%s", d)
	}
}

func TestMarkdownOfAMergedReportSaysWhenEachScenarioRan(t *testing.T) {
	day := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	r := &Report{Date: day.Add(time.Hour), Scenarios: []Result{
		{Name: "steady-state", Date: day, Stratus: Metrics{"x": 1}, Upstream: Metrics{"x": 1}},
		{Name: "memory", Date: day.Add(time.Hour), Stratus: Metrics{"x": 1}, Upstream: Metrics{"x": 1}},
	}}
	if md := r.Markdown(); !strings.Contains(md, "scenarios started (UTC): steady-state 2026-12-01 02:00, memory 2026-12-01 03:00") {
		t.Errorf("merged report does not say when its scenarios ran:\n%s", md)
	}
	r.Scenarios = r.Scenarios[1:]
	if md := r.Markdown(); strings.Contains(md, "Merged") {
		t.Errorf("a single run's report says it is merged:\n%s", md)
	}
}

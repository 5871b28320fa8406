package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Markdown renders the report as the tables of docs/benchmarks.md: one row
// per scenario and metric with both managers' numbers and the ratio
// (upstream / stratus), and a verdict that says plainly where stratus is not
// ahead.
func (r *Report) Markdown() string {
	var b strings.Builder
	flags := fmt.Sprintf("--kube-api-qps=%d --kube-api-burst=%d", r.KubeAPI[0], r.KubeAPI[1])
	switch r.Mode {
	case ModeDefaults:
		flags = "their own defaults (no tuning flags)"
	case ModeTuned:
		flags = strings.Join(TunedFlags, " ")
	}
	fmt.Fprintf(&b, "Run %s on %s/%s, %d CPUs, %s. minicloud: %g requests/s per token (burst %d), %d ms latency per request, load balancers provision in %s. Both managers: %s.\n\n",
		r.Date.Format("2006-01-02 15:04 UTC"), r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.Go,
		r.Cloud.RateLimit, r.Cloud.Burst, r.Cloud.LatencyMS, r.Cloud.LBProvisionDelay, flags)
	if slices.ContainsFunc(r.Scenarios, func(s Result) bool { return strings.HasPrefix(s.Name, openstackCloud+"-") }) {
		fmt.Fprintf(&b, "OpenStack dialect (openstack-*): Octavia load balancers stay PENDING_CREATE for %s and PENDING_UPDATE for %s after each change; requests are counted per route and summed per API and method (e.g. `compute GET`).\n\n",
			r.Cloud.OpenStackProvisionDelay, r.Cloud.OpenStackPendingDelay)
	}
	if slices.ContainsFunc(r.Scenarios, func(s Result) bool { return s.Runs > 1 }) {
		b.WriteString("Scenarios that ran several times show the median and, in parentheses, the smallest and largest run.\n\n")
	}
	// A merged report (scenarios that started before the report's run) holds
	// runs of different times, maybe of different commits: say when each
	// scenario started.
	var starts []string
	for _, s := range r.Scenarios {
		if !s.Date.IsZero() {
			starts = append(starts, s.Name+" "+s.Date.Format("2006-01-02 15:04"))
		}
	}
	if slices.ContainsFunc(r.Scenarios, func(s Result) bool { return !s.Date.IsZero() && s.Date.Before(r.Date.Add(-time.Minute)) }) {
		fmt.Fprintf(&b, "Merged from several runs; scenarios started (UTC): %s.\n\n", strings.Join(starts, ", "))
	}
	b.WriteString("| scenario | parameters | metric | upstream | stratus | upstream / stratus | |\n|---|---|---|---:|---:|---:|---|\n")
	for _, s := range r.Scenarios {
		params := formatParams(s.Params)
		keys := slices.Sorted(maps.Keys(union(s.Upstream, s.Stratus)))
		if len(keys) == 0 {
			fmt.Fprintf(&b, "| %s | %s | — | — | — | — | failed: %s |\n", s.Name, params, formatErrors(s.Errors))
			continue
		}
		for _, k := range keys {
			up, okU := s.Upstream[k]
			st, okS := s.Stratus[k]
			ratio, okR := s.Ratio[k]
			verdict := ""
			switch {
			case (!okU || !okS) && len(s.Errors) > 0:
				verdict = "one side has no number: " + formatErrors(s.Errors)
			case !okU && len(s.Upstream) == 0:
				verdict = "upstream not run"
			case !okS && len(s.Stratus) == 0:
				verdict = "stratus not run"
			case !okU:
				// Both ran: a count by operation that one side lacks is an
				// operation that side never made.
				verdict = "none by upstream"
			case !okS:
				verdict = "none by stratus"
			case okR && ratio < 1:
				verdict = "**stratus behind**"
			case okR && ratio == 1:
				verdict = "equal"
			case isCheck(k):
				verdict = "run check, not compared"
			case !okR && up == 0 && st == 0:
				verdict = "both 0"
			case !okR && st == 0:
				verdict = "stratus 0, upstream not"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", s.Name, params, k,
				num(up, okU)+s.spread(string(upstream), k), num(st, okS)+s.spread(string(stratusCCM), k), num(ratio, okR), verdict)
		}
	}
	for _, s := range r.Scenarios {
		for _, m := range []manager{upstream, stratusCCM} {
			if top, ok := s.HeapProfiles[string(m)]; ok {
				what := "heap profile at the peak (in use"
				if s.Name == ladderScenario.name {
					what = "CPU profile over each rung's window and heap profile after it (cumulative CPU, in-use heap"
				}
				fmt.Fprintf(&b, "\n%s, %s: %s, top %d):\n\n```\n%s\n```\n", s.Name, m, what, heapTopNodes, top)
			}
		}
	}
	return b.String()
}

// spread is " (min–max)" of metric k for side m when the scenario ran
// several times and the runs differ.
func (s Result) spread(m, k string) string {
	r, ok := s.Range[m][k]
	if !ok || r[0] == r[1] {
		return ""
	}
	return fmt.Sprintf(" (%s–%s)", num(r[0], true), num(r[1], true))
}

func union(a, b Metrics) Metrics {
	out := Metrics{}
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

func num(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

func formatParams(p map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, p[k]))
	}
	return strings.Join(parts, " ")
}

func formatErrors(errs map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, k+": "+strings.ReplaceAll(errs[k], "|", "/"))
	}
	return strings.Join(parts, "; ")
}

package bench

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ladderFigures are the scale ladder's per-rung metrics the chart draws,
// with their panel titles.
// A linear figure is drawn on a linear y axis, zeros included: the API
// requests of a settled cluster are mostly none, which a log axis cannot
// show.
var ladderFigures = []struct {
	metric, title string
	linear        bool
}{
	{"peakRSSMiB", "peak RSS, MiB", false},
	{"cpuSecondsPerHour", "CPU seconds per hour", false},
	{"cloudCallsPerHour", "cloud calls per hour", false},
	{"kubeAPIRequestsPerHour", "Kubernetes API requests per hour (watches apart)", true},
}

// WriteLadderChart draws the scale-ladder scenario of the report as line
// charts against the number of nodes, one panel per figure (peak RSS, CPU
// seconds, cloud calls and Kubernetes API requests per hour), one line per
// manager, as a PNG at path. Both axes are logarithmic, so a figure that
// grows linearly with the cluster is a line of slope 1 and a constant one is
// flat, and stratus's few calls are not flattened by upstream's many.
func (r *Report) WriteLadderChart(path string) error {
	i := slices.IndexFunc(r.Scenarios, func(s Result) bool { return s.Name == ladderScenario.name })
	if i < 0 {
		return errors.New("ladder chart: the report has no scale-ladder results")
	}
	res := r.Scenarios[i]
	panels := make([][]*plot.Plot, 2)
	for j, f := range ladderFigures {
		p := plot.New()
		p.Title.Text = f.title
		p.X.Label.Text = "nodes (Services: a fifth as many)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = rungTicks(res)
		if !f.linear {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		p.Legend.Top, p.Legend.Left = true, true
		var lines []any
		for _, m := range []manager{upstream, stratusCCM} {
			pts := ladderPoints(sideOf(res, m), f.metric, f.linear)
			if len(pts) == 0 {
				continue
			}
			lines = append(lines, string(m), pts)
		}
		if len(lines) == 0 {
			return fmt.Errorf("ladder chart: no %s numbers", f.metric)
		}
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return fmt.Errorf("ladder chart: %w", err)
		}
		panels[j/2] = append(panels[j/2], p)
	}
	const w, h = 11 * vg.Inch, 8 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Inch / 3, PadY: vg.Inch / 3, PadTop: vg.Inch / 6, PadBottom: vg.Inch / 6, PadLeft: vg.Inch / 6, PadRight: vg.Inch / 6}
	canvases := plot.Align(panels, tiles, dc)
	for j := range panels {
		for i, p := range panels[j] {
			p.Draw(canvases[j][i])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("ladder chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("ladder chart %s: %w", path, err)
	}
	return f.Close()
}

func sideOf(res Result, m manager) Metrics {
	if m == upstream {
		return res.Upstream
	}
	return res.Stratus
}

// ladderPoints are metric's values by rung ("nodes=01000 peakRSSMiB"), in
// increasing node counts; zero values are left out unless zeros is set (a
// log axis has no 0).
func ladderPoints(m Metrics, metric string, zeros bool) plotter.XYs {
	var pts plotter.XYs
	for _, k := range slices.Sorted(maps.Keys(m)) {
		rung, name, ok := strings.Cut(k, " ")
		if !ok || name != metric || !strings.HasPrefix(rung, "nodes=") || m[k] < 0 || m[k] == 0 && !zeros {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(rung, "nodes="))
		if err != nil || n == 0 {
			continue // the floor (no nodes) has no place on the log axis
		}
		pts = append(pts, plotter.XY{X: float64(n), Y: m[k]})
	}
	return pts
}

// rungTicks labels the x axis at the rungs that were measured.
func rungTicks(res Result) plot.ConstantTicks {
	seen := map[float64]bool{}
	var ticks plot.ConstantTicks
	for _, m := range []Metrics{res.Upstream, res.Stratus} {
		for _, p := range ladderPoints(m, ladderFigures[0].metric, false) {
			if !seen[p.X] {
				seen[p.X] = true
				ticks = append(ticks, plot.Tick{Value: p.X, Label: strconv.Itoa(int(p.X))})
			}
		}
	}
	slices.SortFunc(ticks, func(a, b plot.Tick) int { return int(a.Value - b.Value) })
	return ticks
}

package bench

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WriteChart draws the report's ratios (upstream / stratus) as a bar chart
// PNG at path, with a line at 1: bars above it are where stratus is ahead.
// Per-operation call counts are left out; the totals are drawn.
func (r *Report) WriteChart(path string) error {
	var labels []string
	var values plotter.Values
	for _, s := range r.Scenarios {
		for _, k := range slices.Sorted(maps.Keys(s.Ratio)) {
			if strings.Contains(k, " ") { // "cloudCallsPerHour GET /v1/..."
				continue
			}
			labels = append(labels, s.Name+"\n"+k)
			values = append(values, s.Ratio[k])
		}
	}
	if len(values) == 0 {
		return errors.New("chart: no ratios to draw")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("upstream / stratus (higher is better for stratus), %s", r.Date.Format("2006-01-02"))
	p.Y.Label.Text = "ratio"
	bars, err := plotter.NewBarChart(values, vg.Points(18))
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	p.Add(bars)
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(one)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -1.0 // draw.XLeft
	p.Y.Min = 0
	width := vg.Length(len(values)) * vg.Points(60)
	if width < 6*vg.Inch {
		width = 6 * vg.Inch
	}
	if err := p.Save(width, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}

package bench

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WriteChart draws the report's ratios (upstream / stratus) as a bar chart
// PNG at path. The scale is logarithmic and the bars start at ratio 1: a bar
// up is where stratus is ahead, a bar down where it is behind, and 100x does
// not flatten 0.9x. Per-operation call counts are left out; the totals are
// drawn.
func (r *Report) WriteChart(path string) error {
	var labels []string
	var values plotter.Values
	for _, s := range r.Scenarios {
		for _, k := range slices.Sorted(maps.Keys(s.Ratio)) {
			if strings.Contains(k, " ") { // "cloudCallsPerHour GET /v1/..."
				continue
			}
			if s.Ratio[k] <= 0 {
				continue
			}
			labels = append(labels, s.Name+"\n"+k)
			values = append(values, math.Log10(s.Ratio[k]))
		}
	}
	if len(values) == 0 {
		return errors.New("chart: no ratios to draw")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("upstream / stratus (higher is better for stratus), %s", r.Date.Format("2006-01-02"))
	p.Y.Label.Text = "upstream / stratus (log scale)"
	bars, err := plotter.NewBarChart(values, vg.Points(18))
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	p.Add(bars)
	one := plotter.NewFunction(func(float64) float64 { return 0 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(one)
	lo, hi := math.Floor(min(0, slices.Min(values))), math.Ceil(max(0, slices.Max(values)))
	if lo == hi {
		hi++
	}
	p.Y.Min, p.Y.Max = lo, hi
	p.Y.Tick.Marker = ratioTicks{}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -1.0 // draw.XLeft
	width := vg.Length(len(values)) * vg.Points(60)
	if width < 6*vg.Inch {
		width = 6 * vg.Inch
	}
	if err := p.Save(width, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}

// ratioTicks labels a log10 axis with the ratios themselves: 1/10, 1/2, 1,
// 1/5, 1/2, 1, 2, 5, 10 ...
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := math.Log10(m) + e
			if v < lo-1e-9 || v > hi+1e-9 {
				continue
			}
			ratio := m * math.Pow(10, e)
			label := strconv.FormatFloat(ratio, 'f', -1, 64)
			if ratio < 1 {
				label = "1/" + strconv.FormatFloat(math.Round(1/ratio), 'f', -1, 64)
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	return ticks
}

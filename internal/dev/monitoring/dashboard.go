package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/stratus-ccm/stratus/deploy/mixin"
)

// Panel is a dashboard panel and the queries of its targets.
type Panel struct {
	Dashboard, Title string
	Queries          []string
}

// DashboardPanels returns the panels of the mixin's dashboards rendered with
// config (rows left out), in order.
func DashboardPanels(config map[string]any) ([]Panel, error) {
	r, err := mixin.Render(config)
	if err != nil {
		return nil, err
	}
	var out []Panel
	for _, name := range slices.Sorted(maps.Keys(r.Dashboards)) {
		var d struct {
			Panels []struct {
				Type    string `json:"type"`
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(r.Dashboards[name], &d); err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", name, err)
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			panel := Panel{Dashboard: name, Title: p.Title}
			for _, t := range p.Targets {
				panel.Queries = append(panel.Queries, t.Expr)
			}
			out = append(out, panel)
		}
	}
	return out, nil
}

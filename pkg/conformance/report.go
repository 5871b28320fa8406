package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes one line per scenario (status, name, duration, and
// the failure or skip reason), then the totals.
func WriteTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tSCENARIO\tTIME\tDETAIL")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(string(res.Status)), res.Name, res.Duration.Round(10e6), oneLine(res.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s: %d passed, %d failed, %d skipped\n", r.title(), r.Count(Passed), r.Count(Failed), r.Count(Skipped))
	return err
}

// title is the report's name, or its provider's for a report without one
// (read from JSON written before names existed).
func (r *Report) title() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Provider
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// junitSuites is the JUnit XML format CI systems read.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: one test suite per scenario
// group, named "<provider>/<group>", one test case per scenario.
func WriteJUnit(w io.Writer, reports ...*Report) error {
	var out junitSuites
	for _, r := range reports {
		for _, g := range Groups {
			s := junitSuite{Name: r.title() + "/" + g}
			var total float64
			for _, res := range r.Results {
				if res.Group != g {
					continue
				}
				c := junitCase{Name: res.Name, Classname: r.title() + "." + g, Time: fmt.Sprintf("%.3f", res.Duration.Seconds()), SystemOut: res.Doc}
				switch res.Status {
				case Failed:
					c.Failure = &junitMessage{Message: oneLine(res.Message), Body: res.Message}
					s.Failures++
				case Skipped:
					c.Skipped = &junitMessage{Message: res.Message}
					s.Skipped++
				}
				total += res.Duration.Seconds()
				s.Tests++
				s.Cases = append(s.Cases, c)
			}
			if s.Tests > 0 {
				s.Time = fmt.Sprintf("%.3f", total)
				out.Suites = append(out.Suites, s)
			}
		}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write JUnit XML: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteMatrix writes a Markdown table of scenario groups (rows) by
// report (columns): "passed/run pass" per cell and how many were skipped,
// the skip reason when a whole group was skipped, and the failed
// scenarios' names.
func WriteMatrix(w io.Writer, reports ...*Report) error {
	var b strings.Builder
	b.WriteString("| Scenario group |")
	for _, r := range reports {
		fmt.Fprintf(&b, " %s |", r.title())
	}
	b.WriteString("\n|---|")
	for range reports {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, g := range Groups {
		fmt.Fprintf(&b, "| %s |", g)
		for _, r := range reports {
			fmt.Fprintf(&b, " %s |", matrixCell(r, g))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func matrixCell(r *Report, group string) string {
	var pass, run, skipped int
	var failed []string
	var reason string
	for _, res := range r.Results {
		if res.Group != group {
			continue
		}
		switch res.Status {
		case Passed:
			pass++
			run++
		case Failed:
			run++
			failed = append(failed, "`"+strings.TrimPrefix(res.Name, group+"/")+"`")
		case Skipped:
			skipped++
			if reason == "" {
				reason = res.Message
			}
		}
	}
	more := ""
	if skipped > 0 {
		more = fmt.Sprintf(", %d skipped", skipped)
	}
	switch {
	case run == 0 && reason != "":
		return "skipped: " + reason
	case run == 0:
		return "not run"
	case len(failed) > 0:
		return fmt.Sprintf("%d/%d pass%s; fails %s", pass, run, more, strings.Join(failed, ", "))
	}
	return fmt.Sprintf("%d/%d pass%s", pass, run, more)
}

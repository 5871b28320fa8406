// Command report turns the JUnit files of make e2e (hack/e2e/run.sh) into a
// Markdown table: one row per test of the selection, its outcome with each
// manager that ran, and the reason of every failure and skip as the suite
// gave it.
//
//	go run ./hack/e2e/report -out .cache/e2e [-commit abc1234]
//
// reads <out>/<manager>/junit.xml and <out>/<manager>/duration for the
// managers stratus and upstream (a manager without a junit.xml did not run).
package main

import (
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// managers are the columns, in order.
var managers = []string{"stratus", "upstream"}

// testCase is a <testcase> of Ginkgo's JUnit report.
type testCase struct {
	Name    string   `xml:"name,attr"`
	Status  string   `xml:"status,attr"`
	Time    float64  `xml:"time,attr"`
	Skipped *message `xml:"skipped"`
	Failure *message `xml:"failure"`
	Error   *message `xml:"error"`
}

type message struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

type junit struct {
	Suites []struct {
		Cases []testCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// outcome is one test's result with one manager.
type outcome struct {
	status string // pass, fail, skip
	reason string
	secs   float64
}

func main() {
	out := flag.String("out", ".cache/e2e", "the folder make e2e wrote")
	commit := flag.String("commit", "", "the commit the run was made at")
	flag.Parse()
	if err := run(os.Stdout, *out, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, dir, commit string) error {
	results := map[string]map[string]outcome{} // test -> manager -> outcome
	var ran []string
	durations := map[string]string{}
	for _, m := range managers {
		path := filepath.Join(dir, m, "junit.xml")
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		var j junit
		if err := xml.Unmarshal(data, &j); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ran = append(ran, m)
		if b, err := os.ReadFile(filepath.Join(dir, m, "duration")); err == nil {
			if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				durations[m] = (time.Duration(s) * time.Second).String()
			}
		}
		for _, s := range j.Suites {
			for _, c := range s.Cases {
				name, ok := testName(c.Name)
				if !ok {
					continue
				}
				o, selected := classify(c)
				if !selected {
					continue
				}
				if results[name] == nil {
					results[name] = map[string]outcome{}
				}
				results[name][m] = o
			}
		}
	}
	if len(ran) == 0 {
		return fmt.Errorf("no <manager>/junit.xml under %s", dir)
	}
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	slices.Sort(names)

	fmt.Fprintf(w, "Run of %s", time.Now().UTC().Format("2006-01-02"))
	if commit != "" {
		fmt.Fprintf(w, " at commit %s", commit)
	}
	fmt.Fprintln(w, ".")
	for _, m := range ran {
		counts := map[string]int{}
		for _, n := range names {
			if o, ok := results[n][m]; ok {
				counts[o.status]++
			}
		}
		fmt.Fprintf(w, "- %s: %d passed, %d failed, %d skipped", m, counts["pass"], counts["fail"], counts["skip"])
		if d := durations[m]; d != "" {
			fmt.Fprintf(w, " in %s (environment included)", d)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| test |")
	for _, m := range ran {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|")
	for range ran {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "| %s |", cell(n))
		for _, m := range ran {
			o, ok := results[n][m]
			if !ok {
				fmt.Fprint(w, " not run |")
				continue
			}
			s := fmt.Sprintf("**%s** (%.0fs)", o.status, o.secs)
			if o.reason != "" {
				s += ": " + o.reason
			}
			fmt.Fprintf(w, " %s |", cell(s))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// labels is the list of labels Ginkgo appends to a spec's name
// ("[sig-network, Feature:LoadBalancer, Slow]"); every test of the suite
// has at least its SIG's.
var labels = regexp.MustCompile(` \[[^\[\]]*sig-[^\[\]]*\]$`)

// testName returns a spec's name without Ginkgo's "[It] " prefix and the
// appended labels (the name repeats them); the suite's setup and teardown
// nodes are no tests.
func testName(n string) (string, bool) {
	if !strings.HasPrefix(n, "[It] ") {
		return "", false
	}
	return labels.ReplaceAllString(strings.TrimPrefix(n, "[It] "), ""), true
}

// classify returns a test case's outcome, and false for a spec the focus
// and skip expressions left out (Ginkgo lists those as skipped too).
func classify(c testCase) (outcome, bool) {
	o := outcome{secs: c.Time}
	switch c.Status {
	case "passed":
		o.status = "pass"
	case "skipped":
		msg := ""
		if c.Skipped != nil {
			msg = c.Skipped.Message
		}
		if msg == "skipped" || msg == "" {
			return o, false
		}
		o.status = "skip"
		o.reason = strings.TrimPrefix(msg, "skipped - ")
	default:
		o.status = "fail"
		m := c.Failure
		if m == nil {
			m = c.Error
		}
		if m != nil {
			o.reason = firstLine(m.Message)
		}
		if o.reason == "" {
			o.reason = c.Status
		}
	}
	return o, true
}

var space = regexp.MustCompile(`\s+`)

// firstLine shortens a failure message to its first line.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = space.ReplaceAllString(s, " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

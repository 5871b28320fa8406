// Package e2ejunit reads the JUnit report of the upstream Kubernetes e2e
// suite (e2e.test --ginkgo.junit-report) into one result per test that the
// suite's focus and skip expressions selected, for make e2e's table and
// the smoke test of the suite in make test.
package e2ejunit

import (
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Outcomes of a selected test.
const (
	Pass = "pass"
	Fail = "fail"
	// Skip is a test that skipped itself (e2eskipper), with its reason.
	Skip = "skip"
)

// Result is one selected test's outcome.
type Result struct {
	// Name is the spec's full text, without Ginkgo's "[It] " and the labels
	// it appends.
	Name    string
	Outcome string
	// Reason is the skip's message or the failure's first line.
	Reason  string
	Seconds float64
}

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
}

type report struct {
	Suites []struct {
		Cases []testCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// Read returns the results of the selected tests in a report, in its order.
func Read(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := xml.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Result
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			if res, ok := result(c); ok {
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// labels is the list of labels Ginkgo appends to a spec's name
// ("[sig-network, Feature:LoadBalancer, Slow]"); every test of the suite
// has at least its SIG's.
var labels = regexp.MustCompile(` \[[^\[\]]*sig-[^\[\]]*\]$`)

// result returns a test case's result, and false for what is no selected
// test: the suite's setup and teardown nodes, and the specs the focus and
// skip expressions left out (Ginkgo lists those as skipped, with the
// message "skipped" alone).
func result(c testCase) (Result, bool) {
	if !strings.HasPrefix(c.Name, "[It] ") {
		return Result{}, false
	}
	r := Result{Name: labels.ReplaceAllString(strings.TrimPrefix(c.Name, "[It] "), ""), Seconds: c.Time}
	switch c.Status {
	case "passed":
		r.Outcome = Pass
	case "skipped":
		msg := ""
		if c.Skipped != nil {
			msg = c.Skipped.Message
		}
		if msg == "skipped" || msg == "" {
			return Result{}, false
		}
		r.Outcome = Skip
		r.Reason = strings.TrimPrefix(msg, "skipped - ")
	default:
		r.Outcome = Fail
		m := c.Failure
		if m == nil {
			m = c.Error
		}
		if m != nil {
			r.Reason = firstLine(m.Message)
		}
		if r.Reason == "" {
			r.Reason = c.Status
		}
	}
	return r, true
}

var space = regexp.MustCompile(`\s+`)

// firstLine shortens a message to its first line, at most 300 bytes.
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

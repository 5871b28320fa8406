package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// result is how one package or test ended.
type result struct {
	pkg, test string
	action    string  // pass, fail or skip
	elapsed   float64 // seconds
}

// run is what report reads from the JSON: every ended package and test, and
// the first and last event's times.
type run struct {
	packages    []result
	tests       []result
	first, last time.Time
}

func reportMain(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	out := fs.String("o", "", "the Markdown file to write")
	commit := fs.String("commit", "", "the commit the run tested")
	wall := fs.String("wall", "", `the run's wall time (a Go duration), if measured; "" for the span of the JSON's events, "-" for none`)
	date := fs.String("date", "", "the run's date (default: the first event's)")
	note := fs.String("note", "", "a paragraph about the run, printed under the title")
	_ = fs.Parse(args)
	if *out == "" || fs.NArg() == 0 {
		return errors.New("report: -o and at least one JSON file are required")
	}
	var r run
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = r.read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if len(r.packages) == 0 {
		return errors.New("report: no package results in the JSON")
	}
	var wallTime time.Duration
	if *wall == "-" {
		wallTime = -1
	} else if *wall != "" {
		d, err := time.ParseDuration(*wall)
		if err != nil {
			return fmt.Errorf("report: -wall: %w", err)
		}
		wallTime = d
	}
	md := r.markdown(*commit, *date, *note, wallTime)
	return os.WriteFile(*out, []byte(md), 0o644)
}

// read adds the results of one go test -json stream. A package or test that
// appears twice keeps its last result.
func (r *run) read(in io.Reader) error {
	pkgIndex := map[string]int{}
	for i, p := range r.packages {
		pkgIndex[p.pkg] = i
	}
	testIndex := map[testKey]int{}
	for i, t := range r.tests {
		testIndex[testKey{t.pkg, t.test}] = i
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			continue
		}
		if !ev.Time.IsZero() {
			if r.first.IsZero() || ev.Time.Before(r.first) {
				r.first = ev.Time
			}
			if ev.Time.After(r.last) {
				r.last = ev.Time
			}
		}
		if ev.Action != "pass" && ev.Action != "fail" && ev.Action != "skip" {
			continue
		}
		res := result{pkg: ev.Package, test: ev.Test, action: ev.Action, elapsed: ev.Elapsed}
		if ev.Test == "" {
			if i, ok := pkgIndex[ev.Package]; ok {
				r.packages[i] = res
			} else {
				pkgIndex[ev.Package] = len(r.packages)
				r.packages = append(r.packages, res)
			}
			continue
		}
		k := testKey{ev.Package, ev.Test}
		if i, ok := testIndex[k]; ok {
			r.tests[i] = res
		} else {
			testIndex[k] = len(r.tests)
			r.tests = append(r.tests, res)
		}
	}
	return sc.Err()
}

// byTime sorts results longest first, then by name.
func byTime(a, b result) int {
	if c := cmp.Compare(b.elapsed, a.elapsed); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.test, b.test))
}

// markdown is the report. wall is the measured wall time, 0 for the span
// of the events, negative for none.
func (r *run) markdown(commit, date, note string, wall time.Duration) string {
	var b strings.Builder
	b.WriteString("# Test times\n\n")
	b.WriteString("Where `make test`'s time goes. `make test` saves its `go test -json` output to `.cache/test/make-test.json`;\n`make test-times` regenerates this file from it (hack/testtimes).\n\n")
	b.WriteString(howMakeTestRuns)
	if note != "" {
		b.WriteString(note + "\n\n")
	}
	if date == "" && !r.first.IsZero() {
		date = r.first.UTC().Format("2006-01-02 15:04 MST")
	}
	if date != "" {
		fmt.Fprintf(&b, "- Date: %s\n", date)
	}
	if commit != "" {
		fmt.Fprintf(&b, "- Commit: %s\n", commit)
	}
	switch {
	case wall > 0:
		fmt.Fprintf(&b, "- Wall time of `make test`: %s\n", fmtDuration(wall.Seconds()))
	case wall == 0 && !r.first.IsZero():
		fmt.Fprintf(&b, "- Wall time of the tests (first to last `go test -json` event; the builds before the first test binary starts are not in it): %s\n", fmtDuration(r.last.Sub(r.first).Seconds()))
	}
	var sum float64
	ran := 0
	for _, p := range r.packages {
		if p.action != "skip" {
			sum += p.elapsed
			ran++
		}
	}
	fmt.Fprintf(&b, "- Packages with tests: %d; the sum of their times: %s (packages run side by side, so the wall time is less)\n\n", ran, fmtDuration(sum))

	pkgs := slices.Clone(r.packages)
	slices.SortFunc(pkgs, byTime)
	tests := map[string]int{}
	for _, t := range r.tests {
		if !strings.Contains(t.test, "/") {
			tests[t.pkg]++
		}
	}
	b.WriteString("## Packages by time\n\n| Package | Time | Result | Top-level tests |\n|---|--:|---|--:|\n")
	for _, p := range pkgs {
		if p.action == "skip" {
			continue // no test files
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", p.pkg, fmtDuration(p.elapsed), p.action, tests[p.pkg])
	}

	// The ten longest top-level tests, each with its longest subtest (at
	// any depth). A test that waits for parallel subtests reports little
	// time of its own: its time is at least its longest subtest's.
	var top []result
	longestSub := map[testKey]result{}
	for _, t := range r.tests {
		parent, _, isSub := strings.Cut(t.test, "/")
		if !isSub {
			top = append(top, t)
			continue
		}
		k := testKey{t.pkg, parent}
		if cur, ok := longestSub[k]; !ok || byTime(t, cur) < 0 {
			longestSub[k] = t
		}
	}
	for i, t := range top {
		if s, ok := longestSub[testKey{t.pkg, t.test}]; ok && s.elapsed > t.elapsed {
			top[i].elapsed = s.elapsed
		}
	}
	slices.SortFunc(top, byTime)
	if len(top) > 10 {
		top = top[:10]
	}
	b.WriteString("\n## The ten longest tests\n\nTop-level tests; the times of a package's parallel tests overlap, and a test's time is at least its longest subtest's.\n\n| Test | Package | Time | Result | Its longest subtest |\n|---|---|--:|---|---|\n")
	for _, t := range top {
		sub := ""
		if s, ok := longestSub[testKey{t.pkg, t.test}]; ok {
			sub = fmt.Sprintf("%s (%s)", strings.TrimPrefix(s.test, t.test+"/"), fmtDuration(s.elapsed))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", t.test, t.pkg, fmtDuration(t.elapsed), t.action, sub)
	}
	return b.String()
}

// howMakeTestRuns says how make test spreads the packages and tests over
// the machine (the Makefile's test target and the packages' TestMain).
const howMakeTestRuns = `How make test runs them: most tests wait (managers' periods, polling,
process start-ups) far more than they compute, so more of them run at once
than the machine has cores.

- test/compat, the longest package, runs from the start beside the others
  (TEST_LONGEST) with -parallel TEST_LONGEST_PARALLEL (4): each side of each
  scenario is a parallel subtest with a control plane, cloud and manager of
  its own.
- The other packages run TEST_PARALLEL (4) at a time, the longest ones
  (TEST_FIRST) first: go test starts packages in the order it is given them.
- Packages whose tests are parallel set their own -parallel default in
  TestMain (a -parallel flag overrides it): internal/dev/devenv 4 (its
  end-to-end tests share the binaries they build), internal/dev/bench 4,
  test/chaos 4 (each provider's run on a control plane of its own),
  test/compat 4, deploy 3 (the tests that run a manager, each on a control
  plane of its own; the others share the package's, one after another).
- No test runs at a smaller size in make test than in its own target: the
  chaos runs' short sizes are theirs (make chaos runs the full ones), the
  bench harness check's tiny sizes too (make bench, make bench-quick).

`

// fmtDuration prints seconds as "1m23s" or "4.5s".
func fmtDuration(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.1fs", s)
	}
	d := time.Duration(s+0.5) * time.Second
	return d.Round(time.Second).String()
}

package main

import (
	"strings"
	"testing"
	"time"
)

// stream is go test -json of two packages: one passes, the other has a
// failed test (with a passed sibling), and a third has no test files.
const stream = `{"Time":"2026-12-07T10:00:00Z","Action":"start","Package":"ex/a"}
{"Time":"2026-12-07T10:00:00Z","Action":"run","Package":"ex/a","Test":"TestA"}
{"Time":"2026-12-07T10:00:00Z","Action":"output","Package":"ex/a","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Time":"2026-12-07T10:00:00Z","Action":"output","Package":"ex/a","Test":"TestA","Output":"    a_test.go:9: noise of a passing test\n"}
{"Time":"2026-12-07T10:00:02Z","Action":"output","Package":"ex/a","Test":"TestA","Output":"--- PASS: TestA (2.00s)\n"}
{"Time":"2026-12-07T10:00:02Z","Action":"pass","Package":"ex/a","Test":"TestA","Elapsed":2}
{"Time":"2026-12-07T10:00:02Z","Action":"output","Package":"ex/a","Output":"PASS\n"}
{"Time":"2026-12-07T10:00:02Z","Action":"output","Package":"ex/a","Output":"ok  \tex/a\t2.1s\n"}
{"Time":"2026-12-07T10:00:02Z","Action":"pass","Package":"ex/a","Elapsed":2.1}
not json: a message of go test itself
{"Time":"2026-12-07T10:00:00Z","Action":"run","Package":"ex/b","Test":"TestB"}
{"Time":"2026-12-07T10:00:00Z","Action":"output","Package":"ex/b","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Time":"2026-12-07T10:00:00Z","Action":"run","Package":"ex/b","Test":"TestB/slow"}
{"Time":"2026-12-07T10:00:00Z","Action":"output","Package":"ex/b","Test":"TestB/slow","Output":"=== RUN   TestB/slow\n"}
{"Time":"2026-12-07T10:00:05Z","Action":"output","Package":"ex/b","Test":"TestB/slow","Output":"    b_test.go:20: the reason it failed\n"}
{"Time":"2026-12-07T10:00:05Z","Action":"output","Package":"ex/b","Test":"TestB/slow","Output":"    --- FAIL: TestB/slow (5.00s)\n"}
{"Time":"2026-12-07T10:00:05Z","Action":"fail","Package":"ex/b","Test":"TestB/slow","Elapsed":5}
{"Time":"2026-12-07T10:00:05Z","Action":"run","Package":"ex/b","Test":"TestB/fast"}
{"Time":"2026-12-07T10:00:05Z","Action":"output","Package":"ex/b","Test":"TestB/fast","Output":"    --- PASS: TestB/fast (1.00s)\n"}
{"Time":"2026-12-07T10:00:06Z","Action":"pass","Package":"ex/b","Test":"TestB/fast","Elapsed":1}
{"Time":"2026-12-07T10:00:06Z","Action":"output","Package":"ex/b","Test":"TestB","Output":"--- FAIL: TestB (6.00s)\n"}
{"Time":"2026-12-07T10:00:06Z","Action":"fail","Package":"ex/b","Test":"TestB","Elapsed":6}
{"Time":"2026-12-07T10:00:06Z","Action":"output","Package":"ex/b","Output":"FAIL\n"}
{"Time":"2026-12-07T10:00:06Z","Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t6.2s\n"}
{"Time":"2026-12-07T10:00:06Z","Action":"fail","Package":"ex/b","Elapsed":6.2}
{"Time":"2026-12-07T10:00:06Z","Action":"output","Package":"ex/c","Output":"?   \tex/c\t[no test files]\n"}
{"Time":"2026-12-07T10:00:06Z","Action":"skip","Package":"ex/c","Elapsed":0}
`

func TestRenderPrintsWhatGoTestPrints(t *testing.T) {
	var out strings.Builder
	failed, err := render(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("render says nothing failed; TestB did")
	}
	want := "ok  \tex/a\t2.1s\n" +
		"not json: a message of go test itself\n" +
		"    b_test.go:20: the reason it failed\n" +
		"    --- FAIL: TestB/slow (5.00s)\n" +
		"--- FAIL: TestB (6.00s)\n" +
		"FAIL\n" +
		"FAIL\tex/b\t6.2s\n" +
		"?   \tex/c\t[no test files]\n"
	if got := out.String(); got != want {
		t.Errorf("render printed\n%s\nwant\n%s", got, want)
	}
}

func TestRenderOfAPassingRun(t *testing.T) {
	pass, _, _ := strings.Cut(stream, "not json")
	var out strings.Builder
	failed, err := render(strings.NewReader(pass), &out)
	if err != nil {
		t.Fatal(err)
	}
	if failed {
		t.Error("render says something failed; only ex/a ran, and passed")
	}
	if got, want := out.String(), "ok  \tex/a\t2.1s\n"; got != want {
		t.Errorf("render printed %q, want %q", got, want)
	}
}

func TestRenderOfAPackageThatDies(t *testing.T) {
	// A timeout: the test never ends, the package fails with a panic.
	in := `{"Action":"run","Package":"ex/d","Test":"TestHangs"}
{"Action":"output","Package":"ex/d","Test":"TestHangs","Output":"    d_test.go:5: waiting\n"}
{"Action":"output","Package":"ex/d","Test":"TestHangs","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"ex/d","Output":"FAIL\tex/d\t1.0s\n"}
{"Action":"fail","Package":"ex/d","Elapsed":1}
`
	var out strings.Builder
	failed, err := render(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("render says nothing failed")
	}
	for _, want := range []string{"d_test.go:5: waiting", "panic: test timed out", "FAIL\tex/d"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render printed\n%s\nwithout %q", out.String(), want)
		}
	}
}

func TestReportListsPackagesAndTestsByTime(t *testing.T) {
	var r run
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	md := r.markdown("abc123", "", "", 0)
	for _, want := range []string{
		"- Date: 2026-12-07 10:00 UTC\n",
		"- Commit: abc123\n",
		"(first to last `go test -json` event; the builds before the first test binary starts are not in it): 6.0s\n",
		"| ex/b | 6.2s | fail | 1 |\n| ex/a | 2.1s | pass | 1 |\n",
		"| TestB | ex/b | 6.0s | fail | slow (5.0s) |\n| TestA | ex/a | 2.0s | pass |  |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report\n%s\nwithout %q", md, want)
		}
	}
	if strings.Contains(md, "ex/c") {
		t.Errorf("report lists ex/c, which has no test files:\n%s", md)
	}
	md = r.markdown("", "2026-12-08", "Measured apart.", 754*time.Second)
	for _, want := range []string{"- Date: 2026-12-08\n", "Measured apart.\n", "- Wall time of `make test`: 12m34s\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("report\n%s\nwithout %q", md, want)
		}
	}
	if md = r.markdown("", "", "", -1); strings.Contains(md, "Wall time") || strings.Contains(md, "Commit") {
		t.Errorf("report without a wall time or commit still has one:\n%s", md)
	}
}

func TestFmtDuration(t *testing.T) {
	for s, want := range map[float64]string{4.54: "4.5s", 59.9: "59.9s", 83.4: "1m23s", 436: "7m16s"} {
		if got := fmtDuration(s); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", s, got, want)
		}
	}
}

func TestReportTimesAParallelParentByItsSubtests(t *testing.T) {
	// A parent whose subtests are parallel reports almost no time of its
	// own; its longest subtest is two levels down.
	in := `{"Action":"pass","Package":"ex/p","Test":"TestParity/scenario/upstream","Elapsed":40}
{"Action":"pass","Package":"ex/p","Test":"TestParity/scenario/stratus","Elapsed":30}
{"Action":"pass","Package":"ex/p","Test":"TestParity/scenario","Elapsed":0}
{"Action":"pass","Package":"ex/p","Test":"TestParity","Elapsed":0}
{"Action":"pass","Package":"ex/p","Test":"TestUnit","Elapsed":2}
{"Action":"pass","Package":"ex/p","Elapsed":41}
`
	var r run
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	md := r.markdown("", "", "", -1)
	want := "| TestParity | ex/p | 40.0s | pass | scenario/upstream (40.0s) |\n| TestUnit | ex/p | 2.0s | pass |  |\n"
	if !strings.Contains(md, want) {
		t.Errorf("report\n%s\nwithout %q", md, want)
	}
}

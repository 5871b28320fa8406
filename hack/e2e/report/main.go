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
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/internal/dev/e2ejunit"
)

// managers are the columns, in order.
var managers = []string{"stratus", "upstream"}

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
	results := map[string]map[string]e2ejunit.Result{} // test -> manager -> result
	var ran []string
	durations := map[string]string{}
	for _, m := range managers {
		res, err := e2ejunit.Read(filepath.Join(dir, m, "junit.xml"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		ran = append(ran, m)
		if b, err := os.ReadFile(filepath.Join(dir, m, "duration")); err == nil {
			if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				durations[m] = (time.Duration(s) * time.Second).String()
			}
		}
		for _, r := range res {
			if results[r.Name] == nil {
				results[r.Name] = map[string]e2ejunit.Result{}
			}
			results[r.Name][m] = r
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
				counts[o.Outcome]++
			}
		}
		fmt.Fprintf(w, "- %s: %d passed, %d failed, %d skipped", m, counts[e2ejunit.Pass], counts[e2ejunit.Fail], counts[e2ejunit.Skip])
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
			s := fmt.Sprintf("**%s** (%.0fs)", o.Outcome, o.Seconds)
			if o.Reason != "" {
				s += ": " + o.Reason
			}
			fmt.Fprintf(w, " %s |", cell(s))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

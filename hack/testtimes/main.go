// Command testtimes reads the output of go test -json. It has two modes:
//
//	testtimes render -o FILE
//
// copies go test -json from stdin to FILE and prints what go test prints
// without -json: an ok or FAIL line per package, and the output of each
// failed test (and a failed package's own output); it exits 1 when a test,
// a package or a build failed. make test pipes its go test runs through it.
//
//	testtimes report [-commit C] [-wall W] [-date D] -o docs/test-times.md FILE...
//
// writes a Markdown report of the runs in FILE...: packages by time and the
// ten longest top-level tests. make test-times runs it on the last make
// test's JSON.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "render":
		err = renderMain(os.Args[2:])
	case "report":
		err = reportMain(os.Args[2:])
	default:
		usage()
	}
	var failed failedError
	if errors.As(err, &failed) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testtimes render -o FILE < go-test-json\n       testtimes report [-commit C] [-wall W] [-date D] -o FILE JSON...")
	os.Exit(2)
}

// failedError says the rendered run failed (its output says how).
type failedError struct{}

func (failedError) Error() string { return "tests failed" }

// event is one line of go test -json (cmd/test2json).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

func renderMain(args []string) error {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	out := fs.String("o", "", "file to copy the JSON to")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("render: -o is required")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	failed, rerr := render(io.TeeReader(os.Stdin, w), os.Stdout)
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if rerr != nil {
		return rerr
	}
	if failed {
		return failedError{}
	}
	return nil
}

// testKey names a test of a package ("" for the package itself).
type testKey struct{ pkg, test string }

// render prints the stream in go test's non-verbose form; it reports whether
// anything failed.
func render(in io.Reader, out io.Writer) (failed bool, err error) {
	// output holds each running test's lines until it ends: printed if it
	// fails, dropped if it passes.
	output := map[testKey][]string{}
	// build holds a package's build output until the build's result.
	build := map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			// Not an event (go test's own messages): as is.
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		k := testKey{ev.Package, ev.Test}
		switch ev.Action {
		case "build-output":
			build[ev.ImportPath] = append(build[ev.ImportPath], ev.Output)
		case "build-fail":
			failed = true
			fmt.Fprint(out, strings.Join(build[ev.ImportPath], ""))
			delete(build, ev.ImportPath)
		case "output":
			output[k] = append(output[k], ev.Output)
		case "pass", "skip":
			if ev.Test == "" {
				// The package's summary line ("ok  \tpkg\t1.2s") is its
				// last output.
				if lines := output[k]; len(lines) > 0 {
					fmt.Fprint(out, lines[len(lines)-1])
				}
				dropPackage(output, ev.Package)
				continue
			}
			delete(output, k)
		case "fail":
			failed = true
			if ev.Test != "" {
				fmt.Fprint(out, failedOutput(output[k]))
				delete(output, k)
				continue
			}
			// The package's own output (a panic, a timeout, TestMain's
			// messages) and that of tests that never ended.
			for key, lines := range output {
				if key.pkg == ev.Package && key.test != "" {
					fmt.Fprint(out, failedOutput(lines))
				}
			}
			fmt.Fprint(out, failedOutput(output[k]))
			if ev.FailedBuild != "" {
				fmt.Fprint(out, strings.Join(build[ev.FailedBuild], ""))
			}
			dropPackage(output, ev.Package)
		}
	}
	return failed, sc.Err()
}

func dropPackage(output map[testKey][]string, pkg string) {
	for key := range output {
		if key.pkg == pkg {
			delete(output, key)
		}
	}
}

// failedOutput is a failed test's output without the lines -json's implied
// -v adds (go test without -v prints none of them).
func failedOutput(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		t := strings.TrimLeft(l, " ")
		if strings.HasPrefix(t, "=== RUN") || strings.HasPrefix(t, "=== PAUSE") || strings.HasPrefix(t, "=== CONT") || strings.HasPrefix(t, "=== NAME") {
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

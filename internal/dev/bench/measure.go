package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// managerStats are the manager's minicloud calls since the last reset: total
// and per operation; calls answered 429 are counted too, and also as
// "throttled".
func (e *env) managerStats(ctx context.Context) (int64, map[string]int64, error) {
	st, err := e.mgrCloud.TokenStats(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("minicloud stats: %w", err)
	}
	total := int64(0)
	ops := map[string]int64{}
	for op, n := range st.Requests {
		if strings.Contains(op, "/v1/_") { // the stats reads themselves
			continue
		}
		ops[op] = n
		total += n
	}
	if st.Throttled > 0 {
		ops["throttled (429)"] = st.Throttled
	}
	return total, ops, nil
}

// cpuSeconds is the CPU time (user and system) the manager has used.
func (e *env) cpuSeconds() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.mgr.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read manager CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis: utime and stime are 14 and 15.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("manager /proc stat: %d fields after the name", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("manager /proc stat %q: %w", s, err)
		}
		ticks += v
	}
	return ticks / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// rssParts reads the manager's resident memory now, in MiB: anonymous (its
// heap, stacks and runtime) and file-backed (the pages of its binary it has
// touched, which the kernel can drop and read again).
func (e *env) rssParts() (anon, file float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.mgr.Process.Pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read manager memory: %w", err)
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		for _, f := range []struct {
			key string
			to  *float64
		}{{"RssAnon:", &anon}, {"RssFile:", &file}} {
			if rest, ok := strings.CutPrefix(line, f.key); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				if err != nil {
					return 0, 0, fmt.Errorf("parse %s %q: %w", f.key, rest, err)
				}
				*f.to = kb / 1024
				found++
			}
		}
	}
	if found != 2 {
		return 0, 0, errors.New("RssAnon or RssFile not found in /proc status")
	}
	return anon, file, nil
}

// peakRSS is the manager's peak resident set (VmHWM) in MiB.
func (e *env) peakRSS() (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", e.mgr.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read manager memory: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("VmHWM not found in /proc status")
}

package testsupport

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Children lists the processes whose parent is pid, from /proc.
func Children(pid int) []int {
	var out []int
	for p, parent := range parents() {
		if parent == pid {
			out = append(out, p)
		}
	}
	return out
}

// Descendants lists the processes below pid (children, grandchildren, ...),
// from /proc.
func Descendants(pid int) []int {
	parent := parents()
	var out []int
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// parents maps every process in /proc to its parent; a process that ends
// while it is read is left out.
func parents() map[int]int {
	out := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Format: pid (comm) state ppid ...; comm may contain spaces.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			out[p] = ppid
		}
	}
	return out
}

// ProcName is the command name of pid ("" once it is gone).
func ProcName(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

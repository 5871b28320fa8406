// Package table renders the output of the stratus CLI's client commands:
// aligned tables for people, or indented JSON (-o json) for scripts.
package table

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write writes header and rows as space-aligned columns.
func Write(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Print writes v as indented JSON when format is "json", else the table
// of header and rows.
func Print(w io.Writer, format string, v any, header []string, rows [][]string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return Write(w, header, rows)
}

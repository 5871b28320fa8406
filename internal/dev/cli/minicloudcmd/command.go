// Package minicloudcmd is the `stratus minicloud` command tree: `serve` runs
// the reference cloud, and `instances`, `lbs`, `routes`, `stats` and
// `faults` drive a running one through its Go client with readable tables
// (or JSON with -o json).
package minicloudcmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/internal/dev/cli/table"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// Defaults shared by serve and the client commands.
const (
	defaultListen   = "127.0.0.1:8780"
	defaultStateDir = ".stratus/minicloud"
	tokenFileName   = "token"
)

// NewCommand returns the `minicloud` command.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "minicloud",
		Short: "Run and drive minicloud, the reference cloud with a real L4 data plane",
	}
	cmd.AddCommand(newServeCommand(), newInstancesCommand(), newLBsCommand(), newRoutesCommand(), newStatsCommand(), newFaultsCommand())
	return cmd
}

// clientFlags are the connection flags of every client command.
type clientFlags struct {
	url       string
	token     string
	tokenFile string
	output    string
}

// addClientFlags registers the connection flags as persistent flags of a
// command group and returns where they land.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	url := os.Getenv("MINICLOUD_URL")
	if url == "" {
		url = "http://" + defaultListen
	}
	cmd.PersistentFlags().StringVar(&f.url, "url", url, "minicloud API URL (env MINICLOUD_URL)")
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "bearer token (env MINICLOUD_TOKEN)")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (default "+filepath.Join(defaultStateDir, tokenFileName)+" when it exists)")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	return f
}

// client builds a client from the flags, the environment, or the token
// file a local `minicloud serve` wrote.
func (f *clientFlags) client() (*client.Client, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output %q: want table or json", f.output)
	}
	token := f.token
	if token == "" {
		token = os.Getenv("MINICLOUD_TOKEN")
	}
	if token == "" {
		path := f.tokenFile
		if path == "" {
			path = filepath.Join(defaultStateDir, tokenFileName)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("no token: pass --token, set MINICLOUD_TOKEN or --token-file (%w)", err)
		}
		token = strings.TrimSpace(string(raw))
	}
	return client.New(f.url, token, client.WithUserAgent("stratus-minicloud-cli"))
}

// print writes v as JSON, or as a table of header and rows.
func (f *clientFlags) print(w io.Writer, v any, header []string, rows [][]string) error {
	return table.Print(w, f.output, v, header, rows)
}

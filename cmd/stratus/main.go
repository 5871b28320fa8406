// Command stratus is the developer CLI of stratus: `stratus minicloud` runs
// and drives the reference cloud, `stratus vcsim` a simulated vCenter,
// `stratus dev` a local cluster on them, `stratus conformance` checks a
// provider against the contract, and `stratus bench` and `stratus
// bench-plugin` measure stratus against upstream, `stratus status` shows
// what a running manager is doing, and `stratus provider init` starts a new
// provider's module. Each subcommand tree lives
// in its own package under internal/dev/cli and is added here.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/internal/dev/cli/benchcmd"
	"github.com/stratus-ccm/stratus/internal/dev/cli/conformancecmd"
	"github.com/stratus-ccm/stratus/internal/dev/cli/devcmd"
	"github.com/stratus-ccm/stratus/internal/dev/cli/minicloudcmd"
	"github.com/stratus-ccm/stratus/internal/dev/cli/providercmd"
	"github.com/stratus-ccm/stratus/internal/dev/cli/statuscmd"
	"github.com/stratus-ccm/stratus/internal/dev/cli/vcsimcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "stratus",
		Short:         "Developer tools for stratus: the minicloud reference cloud and more",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(minicloudcmd.NewCommand())
	root.AddCommand(vcsimcmd.NewCommand())
	root.AddCommand(devcmd.NewCommand())
	root.AddCommand(benchcmd.NewCommand())
	root.AddCommand(benchcmd.NewPluginCommand())
	root.AddCommand(benchcmd.NewRealNodesCommand())
	root.AddCommand(conformancecmd.NewCommand())
	root.AddCommand(statuscmd.NewCommand())
	root.AddCommand(providercmd.NewCommand())
	return root
}

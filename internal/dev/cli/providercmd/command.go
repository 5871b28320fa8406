// Package providercmd is `stratus provider`: tools for provider authors.
// `stratus provider init NAME` writes the Go module of a new provider
// (internal/dev/scaffold): the provider with every capability stubbed,
// stratus-ccm and a plugin with it, a conformance driver and test, a
// Makefile and a README.
package providercmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/internal/dev/repo"
	"github.com/stratus-ccm/stratus/internal/dev/scaffold"
)

// NewCommand returns the `provider` command.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "provider",
		Short: "Tools for provider authors: `provider init NAME` starts a new provider",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newInitCommand())
	return cmd
}

func newInitCommand() *cobra.Command {
	var o scaffold.Options
	cmd := &cobra.Command{
		Use:   "init NAME [--module PATH] [--dir DIR] [--stratus CHECKOUT]",
		Short: "Write the Go module of a new cloud provider named NAME",
		Long: `init writes a Go module for a cloud provider registered as NAME
(--cloud-provider=NAME): the provider on k8s.io/cloud-provider and stratus's
extensions, with every capability stubbed and switched off (provider/);
stratus-ccm with it compiled in (cmd/NAME-ccm, around pkg/app's Main); the
provider out of process (cmd/NAME-plugin, around pkg/plugin's Serve); a
conformance driver and the test that runs stratus's conformance kit with it
(conformance/); a Makefile (build, test, conformance) and a README with the
next steps.

NAME is lower-case letters, digits and inner hyphens, starting with a letter.
The directory must be new or empty. The go.mod replaces stratus's module with
a local checkout (stratus is built from source) and starts from its go.mod and
go.sum, so the new module builds with what the checkout already downloaded.
See docs/providers.md ("Your first hour").`,
		Example: `  stratus provider init mycloud
  stratus provider init mycloud --module github.com/me/mycloud --dir ~/src/mycloud`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("NAME: want one argument, the provider's name; got %d", len(args))
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := scaffold.CheckName(o.Name); err != nil {
				return err
			}
			if !cmd.Flags().Changed("stratus") {
				root, err := repo.Root()
				if errors.Is(err, repo.ErrNotFound) {
					return errors.New("--stratus: not set, and no stratus checkout is above the working directory; name the checkout the module builds against with --stratus DIR")
				} else if err != nil {
					return fmt.Errorf("--stratus: %w", err)
				}
				o.Stratus = root
			}
			paths, err := scaffold.Init(o)
			if err != nil {
				return err
			}
			dir := o.Dir
			if dir == "" {
				dir = o.Name
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote the %s provider's module in %s:\n", o.Name, dir)
			for _, p := range paths {
				fmt.Fprintf(out, "  %s\n", p)
			}
			fmt.Fprintf(out, "\nNext:\n  cd %s\n  make build test\n  make conformance KUBECONFIG=/path/to/kubeconfig\nand follow the README's next steps (start with provider/instances.go).\n", shellPath(dir))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Module, "module", "", "module path of the new module (default example.com/NAME)")
	f.StringVar(&o.Dir, "dir", "", "directory to write the module into, new or empty (default ./NAME)")
	f.StringVar(&o.Stratus, "stratus", "", "stratus checkout the go.mod's replace directive points at (default: the checkout above the working directory)")
	return cmd
}

// shellPath quotes p for the hint when it needs it.
func shellPath(p string) string {
	if strings.ContainsAny(p, " '\"$\\") {
		return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
	}
	return filepath.Clean(p)
}

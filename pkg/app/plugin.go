package app

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/pkg/plugin"
)

// newPluginCommand is `stratus-ccm plugin serve`: any provider compiled into
// this build, served out of process (docs/plugins.md).
func newPluginCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Run a provider compiled into this build as an out-of-process plugin",
		Args:  cobra.NoArgs,
	}
	var opts struct {
		provider, cloudConfig, socket, listen, kubeconfig string
		tls                                               plugin.TLSConfig
	}
	serve := &cobra.Command{
		Use:   "serve --provider NAME [--cloud-config FILE] (--socket PATH | --listen HOST:PORT --tls-cert-file ... --tls-key-file ... --tls-client-ca-file ...)",
		Short: "Serve a registered provider over the stratus provider protocol",
		Long: `serve opens the provider registered as --provider with --cloud-config, as
stratus-ccm --cloud-provider would, and serves it on a Unix socket (--socket) or
on TCP with mutual TLS (--listen and the --tls-* files) until SIGTERM. A manager
uses it as a provider of type "plugin".`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := runPluginServe(cmd, opts.provider, opts.cloudConfig, opts.socket, opts.listen, opts.kubeconfig, opts.tls)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "stratus-ccm plugin serve: %v\n", err)
			}
			return err
		},
	}
	f := serve.Flags()
	f.StringVar(&opts.provider, "provider", "", "registered name of the provider to serve (required)")
	f.StringVar(&opts.cloudConfig, "cloud-config", "", "the provider's cloud-config file")
	f.StringVar(&opts.socket, "socket", "", "path of the Unix socket to serve on")
	f.StringVar(&opts.listen, "listen", "", "host:port to serve on over TCP (needs the --tls-* flags)")
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig handed to the provider's Initialize (providers that read Kubernetes objects need it)")
	f.StringVar(&opts.tls.CertFile, "tls-cert-file", "", "the plugin's TLS certificate (with --listen)")
	f.StringVar(&opts.tls.KeyFile, "tls-key-file", "", "the plugin's TLS key (with --listen)")
	f.StringVar(&opts.tls.CAFile, "tls-client-ca-file", "", "CA of accepted manager certificates (with --listen)")
	cmd.AddCommand(serve)
	return cmd
}

func runPluginServe(cmd *cobra.Command, provider, cloudConfig, socket, listen, kubeconfig string, tlsFiles plugin.TLSConfig) error {
	if provider == "" {
		return errors.New("--provider: required")
	}
	if !cloudprovider.IsCloudProvider(provider) {
		return fmt.Errorf("--provider: provider %q is not registered in this build", provider)
	}
	opts := plugin.ServeOptions{ProviderName: provider}
	switch {
	case socket != "" && listen != "":
		return errors.New("--socket and --listen: set one, not both")
	case socket != "":
		opts.Address = "unix://" + socket
	case listen != "":
		if tlsFiles.CertFile == "" || tlsFiles.KeyFile == "" || tlsFiles.CAFile == "" {
			return errors.New("--listen: needs --tls-cert-file, --tls-key-file and --tls-client-ca-file (mutual TLS)")
		}
		opts.Address, opts.TLS = listen, &tlsFiles
	default:
		return errors.New("--socket or --listen: required")
	}
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		opts.ClientBuilder = clientbuilder.SimpleControllerClientBuilder{ClientConfig: rc}
	}
	var config io.Reader
	if cloudConfig != "" {
		f, err := os.Open(cloudConfig)
		if err != nil {
			return fmt.Errorf("--cloud-config: %w", err)
		}
		defer f.Close()
		config = f
	}
	p, err := cloudprovider.GetCloudProvider(provider, config)
	if err != nil {
		return fmt.Errorf("initialize provider %q: %w", provider, err)
	}
	if p == nil {
		return fmt.Errorf("--provider: provider %q is not registered in this build", provider)
	}
	klog.InfoS("stratus-ccm plugin serve", "provider", provider)
	return plugin.Serve(cmd.Context(), p, opts)
}

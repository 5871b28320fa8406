package devenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/stratus-ccm/stratus/minicloud"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	"github.com/stratus-ccm/stratus/vcsim"
)

// EnvFile is the name of the shell file in the state dir that points
// kubectl and the minicloud commands at the environment.
const EnvFile = "env"

func (e *env) writeEnvFile() error {
	body := fmt.Sprintf("export KUBECONFIG=%s\nexport MINICLOUD_URL=%s\nexport MINICLOUD_TOKEN=%s\n",
		shellQuote(e.cp.KubeconfigPath()), shellQuote(e.cloud.url), shellQuote(e.cloud.token))
	if e.vsphere() {
		// `stratus vcsim vm ...` reads its server from this state dir;
		// govc takes the GOVC_ variables.
		body += fmt.Sprintf("export %s=%s\nexport GOVC_URL=%s\nexport GOVC_USERNAME=%s\nexport GOVC_PASSWORD=%s\nexport GOVC_TLS_CA_CERTS=%s\n",
			vcsim.StateDirEnv, shellQuote(e.vcenterDir()), shellQuote(e.vc.URL().String()),
			shellQuote(e.vc.Username()), shellQuote(e.vc.Password()), shellQuote(e.vc.CAFile()))
	}
	if e.openstack() {
		// The python-openstackclient's variables: `openstack server list`
		// and friends talk to the dialect.
		body += fmt.Sprintf("export OS_AUTH_URL=%s\nexport OS_USERNAME=stratus-dev\nexport OS_PASSWORD=%s\nexport OS_USER_DOMAIN_NAME=%s\nexport OS_PROJECT_NAME=%s\nexport OS_PROJECT_DOMAIN_NAME=%s\nexport OS_REGION_NAME=%s\n",
			shellQuote(OpenStackIdentityURL(e.cloud.url)), shellQuote(e.cloud.token), mos.DomainName, mos.ProjectName, mos.DomainName, minicloud.Region)
	}
	path := filepath.Join(e.opts.StateDir, EnvFile)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ErrStateDirInUse means another stratus dev runs on the same state dir.
var ErrStateDirInUse = errors.New("state dir in use by another stratus dev")

// lockStateDir takes an exclusive lock on <dir>/lock for the life of this
// process (the kernel drops it if the process dies), so a second stratus dev
// on the same state fails clearly instead of fighting over etcd's data.
func lockStateDir(dir string) (func(), error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("%s (pid %s): %w", dir, strings.TrimSpace(string(owner)), ErrStateDirInUse)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

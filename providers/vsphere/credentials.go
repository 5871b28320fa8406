package vsphere

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// credential is a vCenter user name and password.
type credential struct {
	user, password string
}

// credentials finds a vCenter's credentials where the config says: inline,
// in a secrets directory (files named like a Secret's keys), or in a
// Kubernetes Secret that the provider watches once Initialize gave it a
// client. Credentials are read at every login, so a rotated password is
// used from the next login on.
type credentials struct {
	vc      *VCenter
	secrets *secretWatch // for Secret-based credentials; nil otherwise
}

// get returns the current credentials, or an error saying why there are
// none (never the values).
func (c *credentials) get() (credential, error) {
	switch {
	case c.vc.SecretName != "":
		if c.secrets == nil {
			return credential{}, fmt.Errorf("credentials of vCenter %s: Secret %s/%s not read yet (the provider reads it once it is initialized)",
				c.vc.Server, c.vc.SecretNamespace, c.vc.SecretName)
		}
		data, err := c.secrets.data()
		if err != nil {
			return credential{}, fmt.Errorf("credentials of vCenter %s: %w", c.vc.Server, err)
		}
		return credentialFromData(c.vc.Server, data, "Secret "+c.vc.SecretNamespace+"/"+c.vc.SecretName)
	case c.vc.SecretsDirectory != "":
		data, err := readSecretsDirectory(c.vc.SecretsDirectory)
		if err != nil {
			return credential{}, fmt.Errorf("credentials of vCenter %s: %w", c.vc.Server, err)
		}
		return credentialFromData(c.vc.Server, data, "secrets directory "+c.vc.SecretsDirectory)
	default:
		return credential{user: c.vc.User, password: c.vc.Password}, nil
	}
}

// credentialFromData finds server's credentials among a Secret's keys, in
// upstream's two layouts: "<server>.username" / "<server>.password", or
// "server_<id>" naming the server with "username_<id>" / "password_<id>"
// (for IPv6 servers, whose colons a key cannot hold).
func credentialFromData(server string, data map[string][]byte, where string) (credential, error) {
	value := func(key string) (string, bool) {
		v, ok := data[key]
		return strings.TrimSuffix(string(v), "\n"), ok
	}
	user, hasUser := value(server + ".username")
	pass, hasPass := value(server + ".password")
	if !hasUser && !hasPass {
		for key, v := range data {
			id, ok := strings.CutPrefix(key, "server_")
			if !ok || strings.TrimSpace(string(v)) != server {
				continue
			}
			user, hasUser = value("username_" + id)
			pass, hasPass = value("password_" + id)
			if !hasUser || !hasPass {
				return credential{}, fmt.Errorf("%s: %s names %s but username_%s or password_%s is missing", where, key, server, id, id)
			}
			break
		}
	}
	switch {
	case !hasUser:
		return credential{}, fmt.Errorf("%s has no key %s.username (nor server_<id> / username_<id>)", where, server)
	case !hasPass:
		return credential{}, fmt.Errorf("%s has no key %s.password (nor server_<id> / password_<id>)", where, server)
	case user == "" || pass == "":
		return credential{}, fmt.Errorf("%s: the user name or password of %s is empty", where, server)
	}
	return credential{user: user, password: pass}, nil
}

// readSecretsDirectory reads a mounted Secret: one file per key.
func readSecretsDirectory(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("secrets directory: %w", err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		// A mounted Secret's files are symlinks to a ..data directory.
		if strings.HasPrefix(e.Name(), "..") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("secrets directory: %w", err)
		}
		data[e.Name()] = b
	}
	return data, nil
}

// secretWatch keeps one Secret's data current with an informer limited to
// that Secret (a field selector on its name), so the provider needs only
// get, list and watch on it.
type secretWatch struct {
	namespace, name string
	onChange        func()

	mu      sync.Mutex
	synced  bool
	secret  map[string][]byte
	present bool

	syncedCh chan struct{} // closed once the informer has listed the Secret
}

func newSecretWatch(namespace, name string, onChange func()) *secretWatch {
	return &secretWatch{namespace: namespace, name: name, onChange: onChange, syncedCh: make(chan struct{})}
}

// waitSynced waits until the Secret has been listed (present or not), stop
// closes or timeout passes, and says whether it was listed.
func (w *secretWatch) waitSynced(stop <-chan struct{}, timeout time.Duration) bool {
	select {
	case <-w.syncedCh:
		return true
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.syncedCh:
		return true
	case <-stop:
	case <-t.C:
	}
	return false
}

// data returns the Secret's data, or an error while it is not known or
// does not exist.
func (w *secretWatch) data() (map[string][]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.synced:
		return nil, fmt.Errorf("secret %s/%s not read yet", w.namespace, w.name)
	case !w.present:
		return nil, fmt.Errorf("secret %s/%s does not exist", w.namespace, w.name)
	}
	return w.secret, nil
}

// start runs the informer until stop closes.
func (w *secretWatch) start(kc kubernetes.Interface, stop <-chan struct{}) {
	factory := informers.NewSharedInformerFactoryWithOptions(kc, 10*time.Minute,
		informers.WithNamespace(w.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.name).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	set := func(obj any) {
		s, ok := obj.(*v1.Secret)
		if !ok || s.Name != w.name {
			return
		}
		w.mu.Lock()
		w.secret, w.present = s.Data, true
		w.mu.Unlock()
		w.onChange()
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) {
			w.mu.Lock()
			w.secret, w.present = nil, false
			w.mu.Unlock()
			w.onChange()
		},
	})
	if err != nil {
		klog.ErrorS(err, "vsphere: cannot watch the credentials Secret", "secret", klog.KRef(w.namespace, w.name))
		return
	}
	factory.Start(stop)
	go func() {
		if cache.WaitForCacheSync(stop, inf.HasSynced) {
			w.mu.Lock()
			w.synced = true
			w.mu.Unlock()
			close(w.syncedCh)
			w.onChange()
		}
	}()
}

// errNoClient is logged when Initialize gets no Kubernetes client although
// credentials come from a Secret.
var errNoClient = errors.New("no Kubernetes client: credentials in Secrets cannot be read")

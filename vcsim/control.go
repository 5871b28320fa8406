package vcsim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/vmware/govmomi/vim25/soap"
)

// ControlPath is the prefix of the control API (Options.Control): a small
// JSON API on the server's own address that drives the run-time operations
// from another process, such as `stratus vcsim vm`. Its requests are not
// counted and not delayed: they are not vCenter traffic.
//
//	GET    /vcsim/v1/vms                   list VMs
//	POST   /vcsim/v1/vms                   create (body: VMSpec)
//	GET    /vcsim/v1/vms/{name}            one VM
//	DELETE /vcsim/v1/vms/{name}            destroy
//	POST   /vcsim/v1/vms/{name}/power-off  (also power-on, shutdown)
//	PUT    /vcsim/v1/vms/{name}/guest      set guest info (body: Guest)
//	GET    /vcsim/v1/requests              request counts (?reset=true resets them after reading)
//
// It takes HTTP basic authentication with the server's credentials. Errors
// are {"error": "..."} with 404 for an unknown VM and 400 for bad input.
const ControlPath = "/vcsim/v1/"

// controlHandler serves the control API of s.
func controlHandler(s *Server) http.Handler {
	mux := http.NewServeMux()
	vm := func(op func(ctx context.Context, name string) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("name")
			if err := op(r.Context(), name); err != nil {
				writeError(w, err)
				return
			}
			writeVM(w, r, s, name, http.StatusOK)
		}
	}
	mux.HandleFunc("GET "+ControlPath+"vms", func(w http.ResponseWriter, r *http.Request) {
		vms, err := s.VMs(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, vms)
	})
	mux.HandleFunc("POST "+ControlPath+"vms", func(w http.ResponseWriter, r *http.Request) {
		var spec VMSpec
		if err := decode(r, &spec); err != nil {
			writeError(w, err)
			return
		}
		vm, err := s.Create(r.Context(), spec)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, vm)
	})
	mux.HandleFunc("GET "+ControlPath+"vms/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeVM(w, r, s, r.PathValue("name"), http.StatusOK)
	})
	mux.HandleFunc("DELETE "+ControlPath+"vms/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Destroy(r.Context(), r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+ControlPath+"vms/{name}/power-off", vm(s.PowerOff))
	mux.HandleFunc("POST "+ControlPath+"vms/{name}/power-on", vm(s.PowerOn))
	mux.HandleFunc("POST "+ControlPath+"vms/{name}/shutdown", vm(s.ShutdownGuest))
	mux.HandleFunc("PUT "+ControlPath+"vms/{name}/guest", func(w http.ResponseWriter, r *http.Request) {
		var g Guest
		if err := decode(r, &g); err != nil {
			writeError(w, err)
			return
		}
		vm(func(ctx context.Context, name string) error { return s.SetGuest(ctx, name, g) })(w, r)
	})
	mux.HandleFunc("GET "+ControlPath+"requests", func(w http.ResponseWriter, r *http.Request) {
		req := s.Requests()
		if r.URL.Query().Get("reset") == "true" {
			s.ResetRequests()
		}
		writeJSON(w, http.StatusOK, req)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.Username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="vcsim"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"the control API takes the server's username and password"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// errBadRequest marks errors of the request body.
var errBadRequest = errors.New("bad request")

func decode(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: decode %s body: %w", errBadRequest, r.URL.Path, err)
	}
	return nil
}

func writeVM(w http.ResponseWriter, r *http.Request, s *Server, name string, status int) {
	vm, err := s.VM(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, vm)
}

type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, errBadRequest), errors.As(err, new(*inputError)):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, apiError{err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Remote drives a server's control API from another process.
type Remote struct {
	base *url.URL // scheme://host:port
	user *url.Userinfo
	http *http.Client
}

// RemoteOptions say how to reach a server's control API.
type RemoteOptions struct {
	// Server is the server's URL (https://host:port, any path is ignored).
	Server string
	// Username and Password are the server's credentials.
	Username, Password string
	// CAFile, or else Thumbprint, is how to trust an HTTPS server.
	CAFile, Thumbprint string
	// Insecure skips verifying an HTTPS server's certificate when neither
	// CAFile nor Thumbprint is given.
	Insecure bool
}

// NewRemote returns a client of the control API.
func NewRemote(o RemoteOptions) (*Remote, error) {
	u, err := url.Parse(o.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("vcsim: server URL %q: want http(s)://host:port", o.Server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		switch {
		case o.CAFile != "":
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("vcsim: CA file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("vcsim: CA file %s holds no PEM certificate", o.CAFile)
			}
		case o.Thumbprint != "":
			// A pinned certificate replaces chain verification, as
			// vSphere clients do with a thumbprint.
			want := strings.ToUpper(o.Thumbprint)
			cfg.InsecureSkipVerify = true
			cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 {
					return errors.New("vcsim: the server sent no certificate")
				}
				cert, err := x509.ParseCertificate(raw[0])
				if err != nil {
					return err
				}
				if got := soap.ThumbprintSHA1(cert); got != want {
					return fmt.Errorf("vcsim: server certificate thumbprint %s, want %s", got, want)
				}
				return nil
			}
		case o.Insecure:
			cfg.InsecureSkipVerify = true
		default:
			return nil, errors.New("vcsim: an https server needs a CA file, a thumbprint or insecure")
		}
		tr.TLSClientConfig = cfg
	}
	return &Remote{
		base: &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"},
		user: url.UserPassword(o.Username, o.Password),
		http: &http.Client{Transport: tr},
	}, nil
}

func (c *Remote) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := c.base.JoinPath(ControlPath, path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	pass, _ := c.user.Password()
	req.SetBasicAuth(c.user.Username(), pass)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("vcsim: %s %s: %w", method, u.Path, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		var e apiError
		_ = json.NewDecoder(res.Body).Decode(&e)
		return &remoteError{
			msg:      fmt.Sprintf("%s %s: %s: %s", method, u.Path, res.Status, e.Error),
			notFound: res.StatusCode == http.StatusNotFound,
		}
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("vcsim: %s %s: decode the answer: %w", method, u.Path, err)
	}
	return nil
}

// remoteError is an error answer of the control API; a 404 is ErrNotFound.
type remoteError struct {
	msg      string
	notFound bool
}

func (e *remoteError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrNotFound) hold for a 404.
func (e *remoteError) Is(target error) bool { return e.notFound && target == ErrNotFound }

// VMs lists every VM.
func (c *Remote) VMs(ctx context.Context) ([]VM, error) {
	var vms []VM
	return vms, c.do(ctx, http.MethodGet, "vms", nil, nil, &vms)
}

// VM returns one VM.
func (c *Remote) VM(ctx context.Context, name string) (VM, error) {
	var vm VM
	return vm, c.do(ctx, http.MethodGet, "vms/"+url.PathEscape(name), nil, nil, &vm)
}

// Create creates a VM, as Server.Create.
func (c *Remote) Create(ctx context.Context, spec VMSpec) (VM, error) {
	var vm VM
	return vm, c.do(ctx, http.MethodPost, "vms", nil, spec, &vm)
}

// Destroy deletes a VM, as Server.Destroy.
func (c *Remote) Destroy(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "vms/"+url.PathEscape(name), nil, nil, nil)
}

// PowerOff powers a VM off and returns it.
func (c *Remote) PowerOff(ctx context.Context, name string) (VM, error) {
	return c.op(ctx, name, "power-off")
}

// PowerOn powers a VM on and returns it.
func (c *Remote) PowerOn(ctx context.Context, name string) (VM, error) {
	return c.op(ctx, name, "power-on")
}

// ShutdownGuest shuts a VM's guest down and returns the VM, powered off.
func (c *Remote) ShutdownGuest(ctx context.Context, name string) (VM, error) {
	return c.op(ctx, name, "shutdown")
}

func (c *Remote) op(ctx context.Context, name, op string) (VM, error) {
	var vm VM
	return vm, c.do(ctx, http.MethodPost, "vms/"+url.PathEscape(name)+"/"+op, nil, nil, &vm)
}

// SetGuest replaces a VM's guest info and returns the VM.
func (c *Remote) SetGuest(ctx context.Context, name string, g Guest) (VM, error) {
	var vm VM
	return vm, c.do(ctx, http.MethodPut, "vms/"+url.PathEscape(name)+"/guest", nil, g, &vm)
}

// Requests returns the server's request counts, resetting them after
// reading when reset is true.
func (c *Remote) Requests(ctx context.Context, reset bool) (Requests, error) {
	var r Requests
	q := url.Values{}
	if reset {
		q.Set("reset", "true")
	}
	return r, c.do(ctx, http.MethodGet, "requests", q, nil, &r)
}

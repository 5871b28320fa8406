package vsphere

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// ErrInvalidLogin is returned (wrapped, naming the vCenter and user) when
// vCenter refuses the configured credentials. It is not retried quickly:
// the credentials must change first.
var ErrInvalidLogin = errors.New("vCenter refused the user name or password")

// httpStatusError is an HTTP answer without a SOAP or JSON body worth
// reading: throttling and gateway errors, which statusTransport turns into
// errors so that they can be classified.
type httpStatusError struct {
	code       int
	status     string
	retryAfter time.Duration
}

func (e *httpStatusError) Error() string { return "HTTP " + e.status }

// statusTransport turns 429, 502, 503 and 504 answers into
// *httpStatusError. Other answers (a SOAP fault comes with 500) pass.
type statusTransport struct{ next http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch res.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e := &httpStatusError{code: res.StatusCode, status: res.Status}
		if s, err := strconv.Atoi(strings.TrimSpace(res.Header.Get("Retry-After"))); err == nil && s > 0 {
			e.retryAfter = time.Duration(s) * time.Second
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
		res.Body.Close()
		return nil, e
	}
	return res, nil
}

// isNotAuthenticated reports whether err says the session is gone (vCenter
// restarted, the session idled out or was terminated): log in again.
func isNotAuthenticated(err error) bool {
	if err == nil {
		return false
	}
	if fault.Is(err, &types.NotAuthenticated{}) || errors.Is(err, errSessionGone) {
		return true
	}
	if soap.IsSoapFault(err) {
		if _, ok := soap.ToSoapFault(err).VimFault().(types.NotAuthenticated); ok {
			return true
		}
	}
	return restStatus(err) == http.StatusUnauthorized
}

// isInvalidLogin reports whether a login failed because of the credentials.
func isInvalidLogin(err error) bool {
	if fault.Is(err, &types.InvalidLogin{}) {
		return true
	}
	if soap.IsSoapFault(err) {
		if _, ok := soap.ToSoapFault(err).VimFault().(types.InvalidLogin); ok {
			return true
		}
	}
	return false
}

// restStatus returns the HTTP status of an error of the vAPI REST client,
// or 0.
func restStatus(err error) int {
	for e := err; e != nil; e = errors.Unwrap(e) {
		for _, code := range []int{401, 403, 404, 429, 500, 502, 503, 504} {
			if rest.IsStatusError(e, code) {
				return code
			}
		}
	}
	return 0
}

// isTLSError reports whether err is a certificate the client does not
// trust: a configuration problem, not worth retrying quickly.
func isTLSError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verification) || strings.Contains(err.Error(), "thumbprint does not match")
}

// classify wraps err with what failed and marks it for stratus's cloud
// layer: throttling (HTTP 429) becomes stratus.Throttled with the server's
// Retry-After, and failures to reach vCenter (refused or reset
// connections, timeouts including the TLS handshake's, 5xx gateway and
// REST answers) stratus.Transient. Certificate errors, refused credentials and
// vCenter faults are returned as they are.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var hs *httpStatusError
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && !isNetTimeout(err):
	case errors.As(err, &hs) && hs.code == http.StatusTooManyRequests, restStatus(err) == http.StatusTooManyRequests:
		var d time.Duration
		if hs != nil {
			d = hs.retryAfter
		}
		err = stratus.Throttled(d, err)
	case errors.Is(err, ErrInvalidLogin):
	case isTLSError(err):
		err = fmt.Errorf("TLS: %w (check caFile, thumbprint or insecureFlag)", err)
	case hs != nil, restStatus(err) >= 500, isConnectionError(err):
		err = stratus.Transient(err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isConnectionError reports whether err is a failure to talk to vCenter at
// all (as opposed to an answer).
func isConnectionError(err error) bool {
	var (
		ue *url.Error
		ne net.Error
		oe *net.OpError
	)
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.As(err, &oe) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// asFault finds a vCenter fault of type T (a fault struct such as
// types.ManagedObjectNotFound) in err.
func asFault[T any](err error, target *T) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		var f any
		switch {
		case soap.IsSoapFault(e):
			f = soap.ToSoapFault(e).VimFault()
		case soap.IsVimFault(e):
			f = soap.ToVimFault(e)
		default:
			continue
		}
		if t, ok := f.(T); ok {
			*target = t
			return true
		}
		if t, ok := f.(*T); ok {
			*target = *t
			return true
		}
		return false
	}
	return false
}

package openstack

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/stratus-ccm/stratus/minicloud"
)

// Keystone users and credentials map onto minicloud tokens: the password of
// a user (any name, in domain Default) or the secret of an application
// credential (any ID or name) must be one of minicloud's bearer tokens. The
// Keystone token issued for it is a new random string bound to that
// minicloud token, so rate limits and call statistics are those of the
// minicloud token. Tokens live in memory: after a restart clients get 401
// and authenticate again.

// token is an issued Keystone token.
type token struct {
	id        string
	minicloud string
	userName  string
	methods   []string
	scoped    bool
	issued    time.Time
	expires   time.Time
}

var identitySvc = &service{prefix: IdentityPrefix, errorBody: identityError}

// identityError is Keystone's (and keystonemiddleware's) error body.
func identityError(status int, msg string) any {
	return map[string]any{"error": map[string]any{"code": status, "message": msg, "title": http.StatusText(status)}}
}

func (d *Dialect) lookupToken(id string) *token {
	if id == "" {
		return nil
	}
	d.tokMu.Lock()
	defer d.tokMu.Unlock()
	t := d.tokens[id]
	if t == nil {
		return nil
	}
	if !d.now().Before(t.expires) {
		delete(d.tokens, id)
		return nil
	}
	return t
}

func (d *Dialect) keystoneRoutes() {
	versions := func(r *request) (int, any, error) {
		return http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{identityVersion(r)}}}, nil
	}
	d.handle(identitySvc, "GET /identity/{$}", true, versions)
	d.handle(identitySvc, "GET /identity", true, versions)
	v3 := func(r *request) (int, any, error) {
		return http.StatusOK, map[string]any{"version": identityVersion(r)}, nil
	}
	d.handle(identitySvc, "GET /identity/v3", true, v3)
	d.handle(identitySvc, "GET /identity/v3/{$}", true, v3)
	d.mux.HandleFunc("POST /identity/v3/auth/tokens", d.issueToken)
	d.srv.RegisterOperations("POST /identity/v3/auth/tokens")
	d.handle(identitySvc, "GET /identity/v3/auth/tokens", false, d.validateToken)
	d.handle(identitySvc, "DELETE /identity/v3/auth/tokens", false, d.revokeToken)
}

func identityVersion(r *request) map[string]any {
	return map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links":       []link{{Href: r.base + IdentityPrefix + "/v3/", Rel: "self"}},
		"media-types": []map[string]string{{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}},
	}
}

// Keystone's auth request (POST /v3/auth/tokens).
type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password *struct {
				User authUser `json:"user"`
			} `json:"password,omitempty"`
			Token *struct {
				ID string `json:"id"`
			} `json:"token,omitempty"`
			ApplicationCredential *struct {
				ID     string    `json:"id,omitempty"`
				Name   string    `json:"name,omitempty"`
				User   *authUser `json:"user,omitempty"`
				Secret string    `json:"secret"`
			} `json:"application_credential,omitempty"`
		} `json:"identity"`
		Scope json.RawMessage `json:"scope,omitempty"`
	} `json:"auth"`
}

type authUser struct {
	ID       string   `json:"id,omitempty"`
	Name     string   `json:"name,omitempty"`
	Domain   *nameRef `json:"domain,omitempty"`
	Password string   `json:"password,omitempty"`
}

type nameRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

type authScope struct {
	Project *struct {
		ID     string   `json:"id,omitempty"`
		Name   string   `json:"name,omitempty"`
		Domain *nameRef `json:"domain,omitempty"`
	} `json:"project,omitempty"`
	Domain *nameRef `json:"domain,omitempty"`
}

var errUnauthenticated = errf(http.StatusUnauthorized, "The request you have made requires authentication.")

// issueToken answers POST /v3/auth/tokens. It is counted and rate limited
// under the minicloud token the credentials name, once they are checked.
func (d *Dialect) issueToken(w http.ResponseWriter, hr *http.Request) {
	r := &request{Request: hr, d: d, base: baseURL(hr), header: http.Header{}}
	const op = "POST /identity/v3/auth/tokens"
	tok, err := d.authenticate(r)
	if err == nil {
		err = d.admitToken(r.Context(), op, tok.minicloud)
	}
	if err != nil {
		d.writeError(w, r, identitySvc, op, err)
		return
	}
	d.tokMu.Lock()
	d.tokens[tok.id] = tok
	d.tokMu.Unlock()
	w.Header().Set("X-Subject-Token", tok.id)
	writeJSON(w, http.StatusCreated, tokenBody(r, tok))
}

func (d *Dialect) authenticate(r *request) (*token, error) {
	var in authRequest
	if err := decodeBody(r, &in); err != nil {
		return nil, err
	}
	id := in.Auth.Identity
	if len(id.Methods) != 1 {
		return nil, badRequest("identity.methods: give exactly one of password, application_credential, token")
	}
	now := d.now()
	tok := &token{methods: id.Methods, issued: now, expires: now.Add(d.opts.TokenTTL)}
	switch id.Methods[0] {
	case "password":
		if id.Password == nil {
			return nil, badRequest("identity.password is required by method password")
		}
		u := id.Password.User
		if err := checkUser(u, true); err != nil {
			return nil, err
		}
		tok.minicloud, tok.userName = u.Password, userLabel(u)
	case "application_credential":
		ac := id.ApplicationCredential
		if ac == nil {
			return nil, badRequest("identity.application_credential is required by method application_credential")
		}
		if ac.ID == "" && (ac.Name == "" || ac.User == nil) {
			return nil, badRequest("identity.application_credential: give id, or name and user")
		}
		if ac.User != nil {
			if err := checkUser(*ac.User, false); err != nil {
				return nil, err
			}
		}
		tok.minicloud, tok.userName = ac.Secret, "appcred-"+ac.ID+ac.Name
	case "token":
		if id.Token == nil {
			return nil, badRequest("identity.token is required by method token")
		}
		old := d.lookupToken(id.Token.ID)
		if old == nil {
			return nil, errUnauthenticated
		}
		// A token made from a token expires with the original.
		tok.minicloud, tok.userName, tok.expires = old.minicloud, old.userName, old.expires
	default:
		return nil, errUnauthenticated
	}
	if tok.minicloud == "" || !d.srv.Authenticate(tok.minicloud) {
		return nil, errUnauthenticated
	}
	scoped, err := checkScope(in.Auth.Scope)
	if err != nil {
		return nil, err
	}
	tok.scoped = scoped
	b := make([]byte, 32)
	rand.Read(b)
	tok.id = "mc" + hex.EncodeToString(b)
	return tok, nil
}

// checkUser accepts users of domain Default; a user named without a domain
// is a 400, as in Keystone.
func checkUser(u authUser, needPassword bool) error {
	if u.ID == "" && u.Name == "" {
		return badRequest("user: give id or name")
	}
	if u.ID == "" && u.Domain == nil {
		return badRequest("user %q: domain is required with a user name", u.Name)
	}
	if u.Domain != nil && !defaultDomain(*u.Domain) {
		return errUnauthenticated
	}
	if needPassword && u.Password == "" {
		return errUnauthenticated
	}
	return nil
}

func defaultDomain(r nameRef) bool {
	return (r.ID == "" || r.ID == DomainID) && (r.Name == "" || r.Name == DomainName) && (r.ID != "" || r.Name != "")
}

func userLabel(u authUser) string {
	if u.Name != "" {
		return u.Name
	}
	return u.ID
}

// checkScope accepts no scope, "unscoped", and project minicloud (by name
// in domain Default or by ID); other projects and domain scopes are 401.
func checkScope(raw json.RawMessage) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `"unscoped"` {
		return false, nil
	}
	var sc authScope
	if err := decodeStrict(raw, &sc); err != nil {
		return false, err
	}
	if sc.Project == nil {
		return false, errUnauthenticated
	}
	p := sc.Project
	switch {
	case p.ID != "":
		if p.ID != projectID() {
			return false, errUnauthenticated
		}
	case p.Name != "":
		if p.Name != ProjectName || p.Domain == nil || !defaultDomain(*p.Domain) {
			return false, errUnauthenticated
		}
	default:
		return false, badRequest("scope.project: give id, or name and domain")
	}
	return true, nil
}

func projectID() string { return hexOf("project", ProjectName) }

func tokenBody(r *request, t *token) any {
	domain := map[string]string{"id": DomainID, "name": DomainName}
	body := map[string]any{
		"methods":    t.methods,
		"user":       map[string]any{"id": hexOf("user", t.userName), "name": t.userName, "domain": domain, "password_expires_at": nil},
		"issued_at":  t.issued.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"expires_at": t.expires.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"audit_ids":  []string{hexOf("audit", t.id)[:22]},
	}
	if t.scoped {
		body["project"] = map[string]any{"id": projectID(), "name": ProjectName, "domain": domain}
		body["roles"] = []map[string]string{{"id": hexOf("role", "member"), "name": "member"}, {"id": hexOf("role", "reader"), "name": "reader"}}
		body["catalog"] = catalog(r.base)
	}
	return map[string]any{"token": body}
}

// catalog lists the services in region minicloud.Region, each with public,
// internal and admin endpoints on this listener.
func catalog(base string) []any {
	entry := func(typ, name, path string) any {
		var eps []any
		for _, iface := range []string{"public", "internal", "admin"} {
			eps = append(eps, map[string]string{
				"id": hexOf("endpoint", typ+iface), "interface": iface,
				"region": minicloud.Region, "region_id": minicloud.Region, "url": base + path,
			})
		}
		return map[string]any{"id": hexOf("service", typ), "type": typ, "name": name, "endpoints": eps}
	}
	return []any{
		entry("identity", "keystone", IdentityPrefix+"/v3/"),
		entry("compute", "nova", ComputePrefix+"/v2.1"),
		entry("network", "neutron", NetworkPrefix+"/"),
		entry("load-balancer", "octavia", LoadBalancerPrefix+"/"),
		entry("image", "glance", ImagePrefix+"/"),
	}
}

// validateToken answers GET /v3/auth/tokens (X-Subject-Token).
func (d *Dialect) validateToken(r *request) (int, any, error) {
	t := d.lookupToken(r.Header.Get("X-Subject-Token"))
	if t == nil || subtle.ConstantTimeCompare([]byte(t.minicloud), []byte(r.tok.minicloud)) != 1 {
		return 0, nil, notFound("Could not find token.")
	}
	r.header.Set("X-Subject-Token", t.id)
	return http.StatusOK, tokenBody(r, t), nil
}

// revokeToken answers DELETE /v3/auth/tokens.
func (d *Dialect) revokeToken(r *request) (int, any, error) {
	id := r.Header.Get("X-Subject-Token")
	t := d.lookupToken(id)
	if t == nil || t.minicloud != r.tok.minicloud {
		return 0, nil, notFound("Could not find token.")
	}
	d.tokMu.Lock()
	delete(d.tokens, id)
	d.tokMu.Unlock()
	return http.StatusNoContent, nil, nil
}

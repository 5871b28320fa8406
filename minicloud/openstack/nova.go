package openstack

import (
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// Nova microversions served: 2.1 to novaMaxVersion.
const (
	novaMinMinor = 1
	novaMaxMinor = 96
	// novaEmbeddedFlavor is the microversion from which a server embeds its
	// flavor instead of linking it.
	novaEmbeddedFlavor = 47
)

var computeSvc = &service{prefix: ComputePrefix, errorBody: computeError}

// computeError is Nova's error body: {"itemNotFound": {"code", "message"}}.
func computeError(status int, msg string) any {
	key := map[int]string{
		400: "badRequest", 403: "forbidden", 404: "itemNotFound", 405: "badMethod",
		406: "notAcceptable", 409: "conflictingRequest", 413: "overLimit", 429: "overLimit",
	}[status]
	if key == "" {
		key = "computeFault"
	}
	return map[string]any{key: map[string]any{"code": status, "message": msg}}
}

// privateNetworkName is the network of instance addresses in Nova's view.
const privateNetworkName = "minicloud"

func (d *Dialect) novaRoutes() {
	d.handle(computeSvc, "GET /compute/{$}", true, func(r *request) (int, any, error) {
		return http.StatusOK, map[string]any{"versions": []any{novaVersion(r)}}, nil
	})
	d.handle(computeSvc, "GET /compute/v2.1/{$}", true, func(r *request) (int, any, error) {
		return http.StatusOK, map[string]any{"version": novaVersion(r)}, nil
	})
	d.handle(computeSvc, "GET /compute/v2.1/servers", false, d.nova(d.listServers(false)))
	d.handle(computeSvc, "GET /compute/v2.1/servers/detail", false, d.nova(d.listServers(true)))
	d.handle(computeSvc, "GET /compute/v2.1/servers/{id}", false, d.nova(d.getServer))
	d.handle(computeSvc, "GET /compute/v2.1/flavors", false, d.nova(d.listFlavors(false)))
	d.handle(computeSvc, "GET /compute/v2.1/flavors/detail", false, d.nova(d.listFlavors(true)))
	d.handle(computeSvc, "GET /compute/v2.1/flavors/{id}", false, d.nova(d.getFlavor))
	d.handle(computeSvc, "GET /compute/v2.1/flavors/{id}/os-extra_specs", false, d.nova(d.flavorExtraSpecs))
	d.handle(computeSvc, "GET /compute/v2.1/flavors/{id}/os-extra_specs/{key}", false, d.nova(d.flavorExtraSpec))
	d.handle(computeSvc, "GET /compute/v2.1/os-availability-zone", false, d.nova(func(*request, int) (int, any, error) {
		var zones []any
		for _, z := range minicloud.Zones {
			zones = append(zones, map[string]any{"zoneName": z, "zoneState": map[string]bool{"available": true}, "hosts": nil})
		}
		return http.StatusOK, map[string]any{"availabilityZoneInfo": zones}, nil
	}))
	d.handle(computeSvc, "GET /compute/v2.1/os-keypairs", false, d.nova(d.listKeypairs))
	d.handle(computeSvc, "GET /compute/v2.1/os-keypairs/{name}", false, d.nova(func(r *request, _ int) (int, any, error) {
		return 0, nil, notFound("Keypair %s not found for user %s", r.PathValue("name"), hexOf("user", r.tok.userName))
	}))
	d.handle(computeSvc, "GET /compute/v2.1/limits", false, d.nova(d.limits))
	// The detail (with hosts) is for administrators only; a project's
	// token is refused as Nova's policy refuses it.
	d.handle(computeSvc, "GET /compute/v2.1/os-availability-zone/detail", false, d.nova(func(*request, int) (int, any, error) {
		return 0, nil, errf(http.StatusForbidden, "Policy doesn't allow os_compute_api:os-availability-zone:detail to be performed.")
	}))
}

func novaVersion(r *request) map[string]any {
	return map[string]any{
		"id": "v2.1", "status": "CURRENT", "version": "2." + strconv.Itoa(novaMaxMinor), "min_version": "2.1",
		"updated": "2013-07-23T11:33:21Z",
		"links":   []link{{Href: r.base + ComputePrefix + "/v2.1/", Rel: "self"}},
	}
}

// nova wraps a compute handler with microversion negotiation: the request
// names a version in OpenStack-API-Version ("compute 2.47") or
// X-OpenStack-Nova-API-Version ("2.47", "latest"); the answer echoes it.
func (d *Dialect) nova(h func(r *request, minor int) (int, any, error)) handler {
	return func(r *request) (int, any, error) {
		minor, err := microversion(r.Header)
		if err != nil {
			return 0, nil, err
		}
		v := "2." + strconv.Itoa(minor)
		r.header.Set("OpenStack-API-Version", "compute "+v)
		r.header.Set("X-OpenStack-Nova-API-Version", v)
		r.header.Set("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
		return h(r, minor)
	}
}

// microversion returns the minor compute version a request asks for (2.1
// when it names none): 400 when malformed, 406 when not served.
func microversion(h http.Header) (int, error) {
	v := ""
	for _, s := range h.Values("OpenStack-API-Version") {
		for _, part := range strings.Split(s, ",") {
			if svc, ver, ok := strings.Cut(strings.TrimSpace(part), " "); ok && strings.EqualFold(svc, "compute") {
				v = strings.TrimSpace(ver)
			}
		}
	}
	if v == "" {
		v = strings.TrimSpace(h.Get("X-OpenStack-Nova-API-Version"))
	}
	switch v {
	case "":
		return novaMinMinor, nil
	case "latest":
		return novaMaxMinor, nil
	}
	major, minor, ok := strings.Cut(v, ".")
	maj, err1 := strconv.Atoi(major)
	mnr, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || maj < 0 || mnr < 0 {
		return 0, badRequest("API Version String %s is of invalid format. Must be of format MajorNum.MinorNum.", v)
	}
	if maj != 2 || mnr < novaMinMinor || mnr > novaMaxMinor {
		return 0, errf(http.StatusNotAcceptable, "Version %s is not supported by the API. Minimum is 2.%d and maximum is 2.%d.", v, novaMinMinor, novaMaxMinor)
	}
	return mnr, nil
}

// server is a Nova server.
type server struct {
	ID        string                   `json:"id"`
	Name      string                   `json:"name"`
	Status    string                   `json:"status"`
	TenantID  string                   `json:"tenant_id"`
	UserID    string                   `json:"user_id"`
	Created   string                   `json:"created"`
	Updated   string                   `json:"updated"`
	HostID    string                   `json:"hostId"`
	Addresses map[string][]address     `json:"addresses"`
	AccessIP4 string                   `json:"accessIPv4"`
	AccessIP6 string                   `json:"accessIPv6"`
	Flavor    any                      `json:"flavor"`
	Image     string                   `json:"image"`
	Metadata  map[string]string        `json:"metadata"`
	Links     []link                   `json:"links"`
	AZ        string                   `json:"OS-EXT-AZ:availability_zone"`
	VMState   string                   `json:"OS-EXT-STS:vm_state"`
	Power     int                      `json:"OS-EXT-STS:power_state"`
	TaskState *string                  `json:"OS-EXT-STS:task_state"`
	KeyName   *string                  `json:"key_name"`
	SecGroups []map[string]string      `json:"security_groups"`
	Volumes   []map[string]interface{} `json:"os-extended-volumes:volumes_attached"`
}

type address struct {
	Addr    string `json:"addr"`
	Version int    `json:"version"`
	Type    string `json:"OS-EXT-IPS:type"`
	MAC     string `json:"OS-EXT-IPS-MAC:mac_addr"`
}

// toServer is the Nova view of an instance: running is ACTIVE and stopped
// SHUTOFF; the private addresses are fixed on network "minicloud" and the
// public one floating on it; tags are metadata.
func toServer(r *request, inst api.Instance, minor int) server {
	mac := macOf(inst.ID)
	addrs := []address{{Addr: inst.PrivateIP, Version: 4, Type: "fixed", MAC: mac}}
	if inst.PrivateIPv6 != "" {
		addrs = append(addrs, address{Addr: inst.PrivateIPv6, Version: 6, Type: "fixed", MAC: mac})
	}
	if inst.PublicIP != "" {
		addrs = append(addrs, address{Addr: inst.PublicIP, Version: 4, Type: "floating", MAC: mac})
	}
	s := server{
		ID: inst.ID, Name: inst.Name, TenantID: projectID(), UserID: hexOf("user", r.tok.userName),
		Created: inst.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), Updated: inst.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"),
		HostID: hexOf("host", inst.Zone), Addresses: map[string][]address{privateNetworkName: addrs},
		Metadata: map[string]string{}, AZ: inst.Zone, SecGroups: []map[string]string{{"name": "default"}},
		Volumes: []map[string]interface{}{},
		Links: []link{
			{Href: r.base + ComputePrefix + "/v2.1/servers/" + inst.ID, Rel: "self"},
			{Href: r.base + ComputePrefix + "/servers/" + inst.ID, Rel: "bookmark"},
		},
	}
	for k, v := range inst.Tags {
		s.Metadata[k] = v
	}
	if inst.State == api.InstanceRunning {
		s.Status, s.VMState, s.Power = "ACTIVE", "active", 1
	} else {
		s.Status, s.VMState, s.Power = "SHUTOFF", "stopped", 4
	}
	it := instanceType(inst.Type)
	if minor >= novaEmbeddedFlavor {
		s.Flavor = map[string]any{"original_name": it.Name, "vcpus": it.VCPUs, "ram": it.MemoryMB, "disk": 0, "ephemeral": 0, "swap": 0, "extra_specs": map[string]string{}}
	} else {
		s.Flavor = map[string]any{"id": it.Name, "links": []link{{Href: r.base + ComputePrefix + "/flavors/" + it.Name, Rel: "bookmark"}}}
	}
	return s
}

// macOf derives an instance's port MAC address in OpenStack's fa:16:3e
// range.
func macOf(id string) string {
	h := hexOf("mac", id)
	return "fa:16:3e:" + h[0:2] + ":" + h[2:4] + ":" + h[4:6]
}

func instanceType(name string) api.InstanceType {
	for _, it := range minicloud.InstanceTypes {
		if it.Name == name {
			return it
		}
	}
	return api.InstanceType{Name: name}
}

// serverFilters are the list filters served; others are a 400 (as Nova
// answers from microversion 2.75, where unknown parameters are errors).
var serverFilters = []string{"name", "status", "flavor", "ip", "ip6", "availability_zone"}

func (d *Dialect) listServers(detail bool) func(r *request, minor int) (int, any, error) {
	return func(r *request, minor int) (int, any, error) {
		q := r.URL.Query()
		p, err := d.parsePage(q)
		if err != nil {
			return 0, nil, err
		}
		match, err := serverMatcher(q)
		if err != nil {
			return 0, nil, err
		}
		insts, err := r.mc.ListInstances(r.Context(), client.ListOptions{})
		if err != nil {
			return 0, nil, err
		}
		var sel []api.Instance
		for _, inst := range insts {
			if match(inst) {
				sel = append(sel, inst)
			}
		}
		pg, more, err := paginate(sel, func(i api.Instance) string { return i.ID }, p, func(m string) error {
			return badRequest("marker [%s] not found", m)
		})
		if err != nil {
			return 0, nil, err
		}
		out := make([]any, 0, len(pg))
		for _, inst := range pg {
			s := toServer(r, inst, minor)
			if detail {
				out = append(out, s)
			} else {
				out = append(out, map[string]any{"id": s.ID, "name": s.Name, "links": s.Links})
			}
		}
		body := map[string]any{"servers": out}
		if len(pg) > 0 {
			if links := nextLinks(r, more, pg[len(pg)-1].ID, p.limit); len(links) > 0 {
				body["servers_links"] = links
			}
		}
		return http.StatusOK, body, nil
	}
}

// serverMatcher compiles the filters of q; name, ip and ip6 are regular
// expressions matched anywhere, as Nova matches them.
func serverMatcher(q map[string][]string) (func(api.Instance) bool, error) {
	var checks []func(api.Instance) bool
	for k, vs := range q {
		if !slices.Contains(serverFilters, k) {
			return nil, badRequest("Invalid input for query parameters %s. Value: %s. Additional properties are not allowed (%q was unexpected)", k, strings.Join(vs, ","), k)
		}
		v := vs[len(vs)-1]
		switch k {
		case "name", "ip", "ip6":
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, badRequest("Invalid input for query parameters %s: %q is not a regular expression: %v", k, v, err)
			}
			fields := map[string]func(api.Instance) []string{
				"name": func(i api.Instance) []string { return []string{i.Name} },
				"ip":   func(i api.Instance) []string { return []string{i.PrivateIP, i.PublicIP} },
				"ip6":  func(i api.Instance) []string { return []string{i.PrivateIPv6} },
			}[k]
			checks = append(checks, func(i api.Instance) bool {
				return slices.ContainsFunc(fields(i), func(s string) bool { return s != "" && re.MatchString(s) })
			})
		case "status":
			want := strings.ToUpper(v)
			checks = append(checks, func(i api.Instance) bool {
				return (i.State == api.InstanceRunning && want == "ACTIVE") || (i.State != api.InstanceRunning && want == "SHUTOFF")
			})
		case "flavor":
			checks = append(checks, func(i api.Instance) bool { return i.Type == v })
		case "availability_zone":
			checks = append(checks, func(i api.Instance) bool { return i.Zone == v })
		}
	}
	return func(i api.Instance) bool {
		for _, c := range checks {
			if !c(i) {
				return false
			}
		}
		return true
	}, nil
}

func (d *Dialect) getServer(r *request, minor int) (int, any, error) {
	id := r.PathValue("id")
	inst, err := r.mc.GetInstance(r.Context(), id)
	var ce *client.Error
	if errors.As(err, &ce) && ce.StatusCode == http.StatusNotFound {
		return 0, nil, notFound("Instance %s could not be found.", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"server": toServer(r, *inst, minor)}, nil
}

func flavorBody(r *request, it api.InstanceType, detail bool, minor int) map[string]any {
	f := map[string]any{
		"id": it.Name, "name": it.Name,
		"links": []link{{Href: r.base + ComputePrefix + "/v2.1/flavors/" + it.Name, Rel: "self"}},
	}
	if minor >= 55 {
		f["description"] = nil
	}
	if detail {
		f["vcpus"], f["ram"], f["disk"], f["swap"] = it.VCPUs, it.MemoryMB, 0, ""
		f["OS-FLV-EXT-DATA:ephemeral"], f["os-flavor-access:is_public"], f["rxtx_factor"] = 0, true, 1.0
		f["OS-FLV-DISABLED:disabled"] = false
		if minor >= 61 {
			f["extra_specs"] = map[string]string{}
		}
	}
	return f
}

// flavorSortKeys are the sort keys Nova accepts; minicloud's flavors
// differ only in vcpus and memory, so the others order them by ID.
var flavorSortKeys = []string{"created_at", "description", "disabled", "ephemeral_gb", "flavorid", "id", "is_public",
	"memory_mb", "name", "root_gb", "rxtx_factor", "swap", "updated_at", "vcpu_weight", "vcpus"}

// flavorQuery selects and orders flavors as Nova's list does: is_public
// (true, false or none; every flavor here is public), minRam, minDisk
// (every flavor here has a 0 GB disk), sort_key and sort_dir.
func flavorQuery(q map[string][]string) ([]api.InstanceType, error) {
	one := func(k string) (string, error) {
		vs := q[k]
		if len(vs) > 1 {
			return "", badRequest("Invalid input for query parameters %s: give it once", k)
		}
		delete(q, k)
		return vs[0], nil
	}
	out := slices.Clone(minicloud.InstanceTypes)
	key, dir := "flavorid", "asc"
	for k := range q {
		v, err := one(k)
		if err != nil {
			return nil, err
		}
		switch k {
		case "is_public":
			if strings.EqualFold(v, "none") {
				continue
			}
			public, err := strconv.ParseBool(strings.ToLower(v))
			if err != nil {
				return nil, badRequest("Invalid is_public filter [%s]", v)
			}
			if !public {
				out = nil
			}
		case "minRam", "minDisk":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, badRequest("Invalid %s filter [%s]", k, v)
			}
			out = slices.DeleteFunc(out, func(it api.InstanceType) bool {
				if k == "minDisk" {
					return n > 0
				}
				return it.MemoryMB < n
			})
		case "sort_key":
			if !slices.Contains(flavorSortKeys, v) {
				return nil, badRequest("Invalid input for query parameters sort_key. Value: %s. %q is not one of %v", v, v, flavorSortKeys)
			}
			key = v
		case "sort_dir":
			if v != "asc" && v != "desc" {
				return nil, badRequest("Invalid input for query parameters sort_dir. Value: %s. %q is not one of ['asc', 'desc']", v, v)
			}
			dir = v
		default:
			return nil, badRequest("Invalid input for query parameters %s. Value: %s. Additional properties are not allowed (%q was unexpected)", k, v, k)
		}
	}
	slices.SortStableFunc(out, func(a, b api.InstanceType) int {
		c := 0
		switch key {
		case "memory_mb":
			c = a.MemoryMB - b.MemoryMB
		case "vcpus":
			c = a.VCPUs - b.VCPUs
		}
		if c == 0 {
			c = strings.Compare(a.Name, b.Name)
		}
		if dir == "desc" {
			c = -c
		}
		return c
	})
	return out, nil
}

func (d *Dialect) listFlavors(detail bool) func(r *request, minor int) (int, any, error) {
	return func(r *request, minor int) (int, any, error) {
		q := r.URL.Query()
		p, err := d.parsePage(q)
		if err != nil {
			return 0, nil, err
		}
		sel, err := flavorQuery(q)
		if err != nil {
			return 0, nil, err
		}
		pg, more, err := paginate(sel, func(it api.InstanceType) string { return it.Name }, p, func(m string) error {
			return badRequest("marker [%s] not found", m)
		})
		if err != nil {
			return 0, nil, err
		}
		out := make([]any, 0, len(pg))
		for _, it := range pg {
			out = append(out, flavorBody(r, it, detail, minor))
		}
		body := map[string]any{"flavors": out}
		if len(pg) > 0 && more {
			body["flavors_links"] = nextLinks(r, more, pg[len(pg)-1].Name, p.limit)
		}
		return http.StatusOK, body, nil
	}
}

func findFlavor(id string) (api.InstanceType, error) {
	for _, it := range minicloud.InstanceTypes {
		if it.Name == id {
			return it, nil
		}
	}
	return api.InstanceType{}, notFound("Flavor %s could not be found.", id)
}

func (d *Dialect) getFlavor(r *request, minor int) (int, any, error) {
	it, err := findFlavor(r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"flavor": flavorBody(r, it, true, minor)}, nil
}

// flavorExtraSpecs answers GET /flavors/{id}/os-extra_specs: minicloud's
// flavors have none.
func (d *Dialect) flavorExtraSpecs(r *request, minor int) (int, any, error) {
	if _, err := findFlavor(r.PathValue("id")); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"extra_specs": map[string]string{}}, nil
}

// flavorExtraSpec answers GET /flavors/{id}/os-extra_specs/{key}.
func (d *Dialect) flavorExtraSpec(r *request, minor int) (int, any, error) {
	if _, err := findFlavor(r.PathValue("id")); err != nil {
		return 0, nil, err
	}
	return 0, nil, notFound("Flavor %s has no extra specs with key %s.", r.PathValue("id"), r.PathValue("key"))
}

// listKeypairs answers GET /os-keypairs: minicloud's instances have no key
// pairs, so the list is empty (paging parameters from 2.35 are checked).
func (d *Dialect) listKeypairs(r *request, minor int) (int, any, error) {
	q := r.URL.Query()
	if minor >= 35 {
		p, err := d.parsePage(q)
		if err != nil {
			return 0, nil, err
		}
		if p.marker != "" {
			return 0, nil, badRequest("marker [%s] not found", p.marker)
		}
	}
	for k, vs := range q {
		if k != "user_id" {
			return 0, nil, badRequest("Invalid input for query parameters %s. Value: %s. Additional properties are not allowed (%q was unexpected)", k, strings.Join(vs, ","), k)
		}
		return 0, nil, errf(http.StatusForbidden, "Policy doesn't allow os_compute_api:os-keypairs:index to be performed.")
	}
	return http.StatusOK, map[string]any{"keypairs": []any{}}, nil
}

// limits answers GET /limits: no quota limits (-1, as a cloud without
// quotas reports them) and what the project uses.
func (d *Dialect) limits(r *request, _ int) (int, any, error) {
	for k, vs := range r.URL.Query() {
		return 0, nil, badRequest("Invalid input for query parameters %s. Value: %s. Additional properties are not allowed (%q was unexpected)", k, strings.Join(vs, ","), k)
	}
	insts, err := r.mc.ListInstances(r.Context(), client.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	cores, ram := 0, 0
	for _, in := range insts {
		it := instanceType(in.Type)
		cores, ram = cores+it.VCPUs, ram+it.MemoryMB
	}
	abs := map[string]int{
		"maxTotalInstances": -1, "maxTotalCores": -1, "maxTotalRAMSize": -1, "maxTotalKeypairs": -1,
		"maxServerMeta": -1, "maxImageMeta": -1, "maxPersonality": -1, "maxPersonalitySize": -1,
		"maxServerGroups": -1, "maxServerGroupMembers": -1, "maxTotalFloatingIps": -1, "maxSecurityGroups": -1,
		"maxSecurityGroupRules": -1,
		"totalInstancesUsed":    len(insts), "totalCoresUsed": cores, "totalRAMUsed": ram,
		"totalServerGroupsUsed": 0, "totalFloatingIpsUsed": 0, "totalSecurityGroupsUsed": 0,
	}
	return http.StatusOK, map[string]any{"limits": map[string]any{"absolute": abs, "rate": []any{}}}, nil
}

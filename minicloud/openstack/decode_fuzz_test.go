package openstack

import (
	"net/http"
	"testing"
)

// decodeRequest runs the decoding and validation of one request body kind
// as the handlers do, and returns the accepted Octavia tree (for the kinds
// that build one) or nil.
func decodeRequest(kind uint8, body []byte) (*lbRecord, error) {
	switch kind % 6 {
	case 0:
		var in lbCreate
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		lb := &lbRecord{ID: "lb"}
		for i := range in.LoadBalancer.Listeners {
			l, pc, err := in.LoadBalancer.Listeners[i].record()
			if err != nil {
				return nil, err
			}
			if err := addListener(lb, l, pc); err != nil {
				return nil, err
			}
		}
		return lb, nil
	case 1:
		var in struct {
			Members []memberCreate `json:"members"`
		}
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		p := pool{ID: "p", Protocol: "TCP", LBAlgorithm: "ROUND_ROBIN", ListenerID: "l"}
		for i := range in.Members {
			m, err := in.Members[i].record()
			if err != nil {
				return nil, err
			}
			p.Members = append(p.Members, m)
		}
		return &lbRecord{ID: "lb", Pools: []pool{p}, Listeners: []listener{{ID: "l", Protocol: "TCP", ProtocolPort: 80, DefaultPoolID: "p"}}}, nil
	case 2:
		var in struct {
			Monitor monitorCreate `json:"healthmonitor"`
		}
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		_, err := in.Monitor.record()
		return nil, err
	case 3:
		var in authRequest
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		_, err := checkScope(in.Auth.Scope)
		return nil, err
	case 4:
		var in fipWrite
		return nil, decodeStrict(body, &in)
	default:
		var in routesBody
		return nil, decodeStrict(body, &in)
	}
}

// FuzzDecodeRequest (seeds in testdata/fuzz/FuzzDecodeRequest): no body panics the decoding, validation or
// projection; rejections are 4xx; an accepted tree projects to listeners
// and targets minicloud accepts.
func FuzzDecodeRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		lb, err := decodeRequest(kind, body)
		if err != nil {
			oe, ok := err.(*osError)
			if !ok || oe.status < 400 || oe.status >= 500 || oe.msg == "" {
				t.Fatalf("rejection %v is not a 4xx with a message", err)
			}
			return
		}
		if lb == nil {
			return
		}
		spec, err := project(lb, map[string]string{})
		if err != nil {
			if oe, ok := err.(*osError); !ok || oe.status != http.StatusBadRequest {
				t.Fatalf("projection error %v is not a 400", err)
			}
			return
		}
		for _, l := range spec.Listeners {
			if l.Port < 1 || l.Port > 65535 || l.TargetPort < 1 || l.TargetPort > 65535 || (l.Protocol != "TCP" && l.Protocol != "UDP") {
				t.Fatalf("projected listener %+v", l)
			}
		}
		for _, tg := range spec.Targets {
			if tg.IP == "" {
				t.Fatalf("projected target %+v without an address", tg)
			}
		}
	})
}

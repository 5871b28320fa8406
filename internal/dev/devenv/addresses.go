package devenv

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// choosePorts returns --port-base's ports, else the previous run's ports
// when they are all free (so a restart keeps the addresses users have in
// their shells), else free ports. The choice is saved in <state-dir>/ports.json.
func (e *env) choosePorts() (Ports, error) {
	path := filepath.Join(e.opts.StateDir, "ports.json")
	var ports Ports
	if e.opts.PortBase != 0 {
		ports = PortsFrom(e.opts.PortBase)
		if busy := ports.busy(); len(busy) > 0 {
			return Ports{}, fmt.Errorf("--port-base %d: ports %v in use", e.opts.PortBase, busy)
		}
	} else if prev, err := os.ReadFile(path); err == nil && json.Unmarshal(prev, &ports) == nil && ports.allFree() {
		// reuse
	} else if ports, err = FreePorts(); err != nil {
		return Ports{}, err
	}
	data, err := json.Marshal(ports)
	if err != nil {
		return Ports{}, fmt.Errorf("save ports: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return Ports{}, fmt.Errorf("save ports: %w", err)
	}
	return ports, nil
}

// Address blocks: the second octet of the loopback /16 that holds an
// environment's instance IPs, public IPs and load-balancer VIPs. Blocks
// derived from the state dir are in [firstDerivedBlock, lastDerivedBlock];
// the blocks above are left for explicit use (the tests take them, so they
// never meet a developer's environment).
const (
	firstDerivedBlock = 200
	lastDerivedBlock  = 247
)

// addressBlock returns the environment's block: --address-block, else the
// one saved by an earlier start, else one derived from the state dir (so two
// environments on one machine most likely differ). The result is saved in
// <state-dir>/address-block: the cloud's stored addresses must stay valid.
func addressBlock(stateDir string, flag int) (int, error) {
	path := filepath.Join(stateDir, "address-block")
	block := flag
	if block == 0 {
		if raw, err := os.ReadFile(path); err == nil {
			block, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		}
	}
	if block == 0 {
		h := fnv.New32a()
		h.Write([]byte(stateDir))
		block = firstDerivedBlock + int(h.Sum32()%(lastDerivedBlock-firstDerivedBlock+1))
	}
	if block < 1 || block > 254 {
		return 0, fmt.Errorf("address block %d (from --address-block or %s): must be in [1, 254] (127.<block>.0.0/16)", block, path)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(block)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("save address block: %w", err)
	}
	return block, nil
}

// addressPools splits 127.<block>.0.0/16 into the instance, public and VIP
// pools.
func addressPools(block int) (instances, public, vips netip.Prefix) {
	octet := byte(block)
	instances = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 0, 0}), 18)
	public = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 64, 0}), 18)
	vips = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 128, 0}), 17)
	return instances, public, vips
}

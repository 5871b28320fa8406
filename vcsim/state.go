package vcsim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// StateFile is the file in a state dir that says how to reach a running
// server: `stratus vcsim` and `stratus dev --cloud vsphere` write it, the
// client commands (`stratus vcsim vm ...`) read it.
const StateFile = "server.json"

// StateDirEnv names the environment variable that, when set, is the default
// state dir of the client commands (the env file of `stratus dev --cloud
// vsphere` sets it, so they reach its simulated vCenter).
const StateDirEnv = "STRATUS_VCSIM_STATE_DIR"

// State is the content of StateFile: what a client needs to reach the
// server's control API.
type State struct {
	Server     string `json:"server"` // https://host:port
	Username   string `json:"username"`
	Password   string `json:"password"`
	CAFile     string `json:"caFile,omitempty"`
	Thumbprint string `json:"thumbprint,omitempty"`
}

// State returns how to reach s.
func (s *Server) State() State {
	return State{
		Server: s.URL().Scheme + "://" + s.Addr(), Username: s.Username(), Password: s.Password(),
		CAFile: s.CAFile(), Thumbprint: s.Thumbprint(),
	}
}

// RemoteOptions returns the options of NewRemote for the server st names.
func (st State) RemoteOptions() RemoteOptions {
	return RemoteOptions{Server: st.Server, Username: st.Username, Password: st.Password, CAFile: st.CAFile, Thumbprint: st.Thumbprint}
}

// WriteState writes st to dir/StateFile, readable by its owner only (it
// holds the password).
func WriteState(dir string, st State) error {
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("vcsim: encode the server state: %w", err)
	}
	path := filepath.Join(dir, StateFile)
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("vcsim: write the server state %s: %w", path, err)
	}
	return nil
}

// ReadState reads dir/StateFile; a missing file is an error for which
// errors.Is(err, fs.ErrNotExist) holds.
func ReadState(dir string) (State, error) {
	path := filepath.Join(dir, StateFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("vcsim: read the server state: %w", err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		return State{}, fmt.Errorf("vcsim: server state %s: %w", path, err)
	}
	return st, nil
}

package vsphere

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialFromData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    map[string]string
		want    credential
		wantErr string
	}{
		{"server keys", map[string]string{"vc.example.com.username": "u\n", "vc.example.com.password": "p\n", "other.username": "x"},
			credential{"u", "p"}, ""},
		{"alternative keys", map[string]string{"server_a": "vc.example.com", "username_a": "u", "password_a": "p"}, credential{"u", "p"}, ""},
		{"alternative keys incomplete", map[string]string{"server_a": "vc.example.com", "username_a": "u"}, credential{}, "password_a is missing"},
		{"no keys", map[string]string{"other.username": "u"}, credential{}, "has no key vc.example.com.username"},
		{"no password", map[string]string{"vc.example.com.username": "u"}, credential{}, "has no key vc.example.com.password"},
		{"empty password", map[string]string{"vc.example.com.username": "u", "vc.example.com.password": "\n"}, credential{}, "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			got, err := credentialFromData("vc.example.com", data, "Secret ns/creds")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("credentialFromData = %+v, %v", got, err)
			}
		})
	}
}

func TestSecretsDirectory(t *testing.T) {
	s := newSim(t)
	h, _ := s.hostPort()
	dir := t.TempDir()
	write := func(user, pass string) {
		t.Helper()
		for k, v := range map[string]string{h + ".username": user, h + ".password": pass} {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(s.srv.Username(), "rotated-away")
	hs, p := s.hostPort()
	cfg := "global:\n  secretsDirectory: " + dir + "\n  insecureFlag: true\nvcenter:\n  sim:\n    server: " + hs + "\n    port: " + p + "\n"
	c := s.cloud(cfg, nil)
	_, err := c.ListInstances(t.Context())
	if !errors.Is(err, ErrInvalidLogin) || strings.Contains(err.Error(), "rotated-away") {
		t.Fatalf("ListInstances with a wrong password in the directory: %v", err)
	}
	if !strings.Contains(err.Error(), "directory "+dir) {
		t.Errorf("error %q does not say where the credentials came from", err)
	}
	// The next login reads the files again.
	write(s.srv.Username(), s.srv.Password())
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatalf("ListInstances after the password was fixed: %v", err)
	}
	c2 := s.cloud(strings.Replace(cfg, dir, filepath.Join(dir, "missing"), 1), nil)
	if _, err := c2.ListInstances(t.Context()); err == nil || !strings.Contains(err.Error(), "secrets directory") {
		t.Errorf("ListInstances with a missing secrets directory: %v", err)
	}
}

func TestSecretNotReadYet(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader("global:\n  secretName: creds\n  secretNamespace: kube-system\nvcenter:\n  a:\n    server: vc.example.com\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListInstances(t.Context()); err == nil || !strings.Contains(err.Error(), "Secret kube-system/creds not read yet") {
		t.Errorf("ListInstances before Initialize: %v", err)
	}
}

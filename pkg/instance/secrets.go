package instance

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Keys of the mounted credentials Secret: one file each.
const (
	SecretUsername            = "username"
	SecretPassword            = "password"
	SecretDatabase            = "database"
	SecretSuperuserPassword   = "superuser-password"
	SecretReplicationPassword = "replication-password"
)

// Secrets reads credentials from a mounted Secret directory. Files are read
// on every call, so a rotated Secret is picked up without a restart.
type Secrets struct{ Dir string }

// Get returns the value of key without the trailing newline an editor (or
// echo) adds; an empty value is an error, never a blank password.
func (s Secrets) Get(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, key))
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", key, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("secret %s is empty", key)
	}
	return v, nil
}

// Optional is Get of a key the Secret may not hold: "" and no error when
// it does not.
func (s Secrets) Optional(key string) (string, error) {
	v, err := s.Get(key)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return v, err
}

// CleanEnv is the environment for child processes: the manager's own minus
// anything that looks like a credential, so no password reaches a
// long-lived process's environment by accident.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		if strings.Contains(u, "PASSWORD") || strings.Contains(u, "SECRET") || u == "PGPASSWORD" || u == "MYSQL_PWD" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

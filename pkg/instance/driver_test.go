package instance

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// In a pod the engine listens on the pod's IP and its own loopback (where
// kubectl port-forward connects); where instances share a loopback, on
// their address only.
func TestListenAddresses(t *testing.T) {
	for _, tc := range []struct {
		cfg  DriverConfig
		want []string
	}{
		{DriverConfig{ListenHost: "10.210.0.7", ListenLoopback: true}, []string{"10.210.0.7", "127.0.0.1"}},
		{DriverConfig{ListenHost: "127.1.0.7"}, []string{"127.1.0.7"}},
		{DriverConfig{ListenHost: "127.0.0.1", ListenLoopback: true}, []string{"127.0.0.1"}},
	} {
		if got := tc.cfg.ListenAddresses(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.cfg, got, tc.want)
		}
	}
}

type lockOwner struct {
	Driver
	locks []string
}

func (l lockOwner) StaleLocks() []string { return l.locks }

// TestRemoveStaleLocks: the sockets, socket locks and pid files a killed
// container left go, with the engine's own lock files; what else the run
// directory holds stays.
func TestRemoveStaleLocks(t *testing.T) {
	run, data := t.TempDir(), t.TempDir()
	stale := []string{".s.PGSQL.5432", ".s.PGSQL.5432.lock", "mysqld.sock", "mysqld.sock.lock", "mysqld.pid", "mariadbd.pid"}
	kept := []string{"pgpass", "backup-123"}
	for _, name := range append(append([]string{}, stale...), kept...) {
		if err := os.WriteFile(filepath.Join(run, name), []byte("17\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pidFile := filepath.Join(data, "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte("17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveStaleLocks(run, lockOwner{locks: []string{pidFile, filepath.Join(data, "absent.pid")}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		if _, err := os.Stat(filepath.Join(run, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(run, name)); err != nil {
			t.Errorf("%s went: %v", name, err)
		}
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("the engine's own lock file is still there: %v", err)
	}
}

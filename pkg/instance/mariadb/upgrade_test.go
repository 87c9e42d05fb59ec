package mariadb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// upgradeDriver is a driver whose server answers VERSION() with version,
// whose data directory holds the upgrade info files given, and whose
// mariadb-upgrade is a script that records its arguments and exits with
// exit. It returns where the script records them.
func upgradeDriver(t *testing.T, version string, files map[string]string, exit int) (*Driver, string) {
	t.Helper()
	d, conn := newFakeDriver(t, nil, nil)
	conn.Row = func(q string) map[string]string {
		if q == "SELECT VERSION() AS version" {
			return map[string]string{"version": version}
		}
		return nil
	}
	if err := os.MkdirAll(d.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d.DataDir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$@\" >>" + calls + "\necho 'Phase 7/8: Running mysqlcheck'\necho 'some failure' >&2\nexit " + string(rune('0'+exit)) + "\n"
	if err := os.WriteFile(filepath.Join(bin, "mariadb-upgrade"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d.cfg.BinDir = bin
	return d, calls
}

func upgradeCalls(t *testing.T, calls string) []string {
	t.Helper()
	b, err := os.ReadFile(calls)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestUpgradeDataRunsMariadbUpgradeOnlyForAnotherVersionsData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		files   map[string]string
		upgrade bool
	}{
		{"10.11's data under 11.8", "11.8.3-MariaDB-0+deb13u1", map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB"}, true},
		{"a patch release", "10.11.20-MariaDB-0+deb12u1", map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB"}, true},
		{"the server's own data", "10.11.19-MariaDB-0+deb12u1", map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB"}, false},
		// mariadb-upgrade writes a NUL-terminated string in some versions.
		{"the server's own data, NUL-terminated", "10.11.19-MariaDB-0+deb12u1", map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB\x00"}, false},
		{"11.x's own file is read first", "11.8.3-MariaDB-0+deb13u1", map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB", "mariadb_upgrade_info": "11.8.3-MariaDB"}, false},
		{"no record at all", "10.11.19-MariaDB-0+deb12u1", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, calls := upgradeDriver(t, tc.version, tc.files, 0)
			if err := d.UpgradeData(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := upgradeCalls(t, calls)
			if !tc.upgrade {
				if len(got) != 0 {
					t.Fatalf("mariadb-upgrade ran on the server's own data: %q", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("mariadb-upgrade ran %d times, want once: %q", len(got), got)
			}
			// Defaults files first (a client reads --no-defaults only there),
			// and never into the binary log: each instance upgrades its own data.
			for _, want := range []string{"--no-defaults ", "--socket=" + d.socket(), "--skip-write-binlog", "--skip-ssl", "--force", "--tmpdir=" + d.cfg.RunDir} {
				if !strings.Contains(got[0], want) {
					t.Errorf("mariadb-upgrade %s: want %s", got[0], want)
				}
			}
			if !strings.HasPrefix(got[0], "--no-defaults ") {
				t.Errorf("mariadb-upgrade %s: --no-defaults must come first", got[0])
			}
		})
	}
}

func TestUpgradeDataSaysWhatFailed(t *testing.T) {
	d, _ := upgradeDriver(t, "11.8.3-MariaDB-0+deb13u1", map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB"}, 2)
	err := d.UpgradeData(context.Background())
	if err == nil {
		t.Fatal("a failed mariadb-upgrade was taken for a done upgrade")
	}
	for _, want := range []string{"from 10.11.19 to 11.8.3", "exit status 2", "some failure"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want it to say %q", err, want)
		}
	}
}

func TestAClonesUpgradeRecordIsTheCopiedServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  map[string]string
	}{
		{"10.11's backup", map[string]string{"xtrabackup_info": "uuid = 1\nname = \ntool_name = mariadb-backup\nserver_version = 10.11.19-MariaDB-0+deb12u1\nstart_time = x\n"},
			map[string]string{"mysql_upgrade_info": "10.11.19-MariaDB"}},
		{"11.x's backup", map[string]string{"mariadb_backup_info": "server_version = 11.8.9-MariaDB-0+deb13u1\n"},
			map[string]string{"mysql_upgrade_info": "11.8.9-MariaDB"}},
		{"no version in it", map[string]string{"xtrabackup_info": "uuid = 1\n"}, nil},
		{"no info file", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := upgradeRecordOfBackup(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || got["mysql_upgrade_info"] != tc.want["mysql_upgrade_info"] {
				t.Errorf("record %v, want %v", got, tc.want)
			}
			// What the record says is what UpgradeData reads back.
			if tc.want != nil {
				for name, content := range got {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if r, _ := upgradedRelease(dir); r+"-MariaDB" != tc.want["mysql_upgrade_info"] {
					t.Errorf("read back as %q", r)
				}
			}
		})
	}
}

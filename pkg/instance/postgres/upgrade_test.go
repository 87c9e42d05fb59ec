package postgres

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance"
)

func TestMajorOf(t *testing.T) {
	for in, want := range map[string]string{
		"postgres (PostgreSQL) 17.12 (Debian 17.12-0+deb13u1)\n": "17",
		"15.18 (Debian 15.18-0+deb12u1)":                         "15",
		"9.6.24":                                                 "9",
		"18devel":                                                "",
	} {
		if got := majorOf(in); got != want {
			t.Errorf("majorOf(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"15", "17", -1}, {"9", "15", -1}, {"17", "17", 0}, {"18", "17", 1}} {
		if got := compareMajors(tc.a, tc.b); (got > 0) != (tc.want > 0) || (got < 0) != (tc.want < 0) {
			t.Errorf("compareMajors(%s, %s) = %d, want the sign of %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestOldBinDirIsBesideTheServersInDebiansLayout: the old major's server
// is looked for only where Debian installs majors side by side, and its
// absence is an error that says what the image lacks.
func TestOldBinDirIsBesideTheServersInDebiansLayout(t *testing.T) {
	root := t.TempDir()
	for _, major := range []string{"15", "17"} {
		bin := filepath.Join(root, "usr", "lib", "postgresql", major, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "postgres"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := New(instance.DriverConfig{BinDir: filepath.Join(root, "usr", "lib", "postgresql", "17", "bin")})
	if got, err := d.oldBinDir("15", "17"); err != nil || got != filepath.Join(root, "usr", "lib", "postgresql", "15", "bin") {
		t.Errorf("oldBinDir(15) = %q, %v", got, err)
	}
	if _, err := d.oldBinDir("16", "17"); err == nil || !strings.Contains(err.Error(), "the image has no PostgreSQL 16 server") || !strings.Contains(err.Error(), "postgresql-16") {
		t.Errorf("oldBinDir(16) without 16's server: %v", err)
	}
	other := New(instance.DriverConfig{BinDir: filepath.Join(root, "opt", "pg", "bin")})
	if _, err := other.oldBinDir("15", "17"); err == nil || !strings.Contains(err.Error(), "Debian's layout") {
		t.Errorf("oldBinDir outside Debian's layout: %v", err)
	}
}

// TestUpgradeFailureSaysWhatPgUpgradeSaid: the cause is kept from the
// check that failed on, with the files pg_upgrade points at, which the
// removal of the failed upgrade's directory would otherwise take along.
func TestUpgradeFailureSaysWhatPgUpgradeSaid(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "tables_using_reg.txt")
	if err := os.WriteFile(list, []byte("In database: appdb\n  public.refused.f\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := `Performing Consistency Checks
-----------------------------
Checking cluster versions                                     ok
Checking for reg* data types in user tables                   fatal

Your installation contains one of the reg* data types in user tables.
These data types reference system OIDs that are not preserved by
pg_upgrade, so this cluster cannot currently be upgraded.  You can
drop the problem columns and restart the upgrade.
A list of the problem columns is in the file:
    ` + list + `

Failure, exiting
`
	// PostgreSQL 17 groups the data type checks.
	out17 := strings.Replace(out, "Checking for reg* data types in user tables                   fatal",
		"Checking data type usage                                      failed check: Checking for reg* data types in user tables\n\nData type checks failed:", 1)
	for _, tc := range []struct{ name, out, check string }{
		{"16", out, "Checking for reg* data types in user tables fatal"},
		{"17", out17, "Checking data type usage failed check: Checking for reg* data types in user tables"},
	} {
		got := upgradeFailure(tc.out)
		for _, want := range []string{tc.check, "cannot currently be upgraded", "tables_using_reg.txt: In database: appdb | public.refused.f", "Failure, exiting"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: upgradeFailure = %q; want it to say %q", tc.name, got, want)
			}
		}
		if strings.Contains(got, "Checking cluster versions") {
			t.Errorf("%s: upgradeFailure = %q: the checks that passed are noise", tc.name, got)
		}
	}
}

// TestAnInterruptedSwapIsFinished: a crash between moving PGDATA aside and
// renaming the upgraded directory in leaves no PGDATA; the next look at
// the data puts the complete upgraded directory in place instead of
// taking the instance for an empty one. An incomplete one is left alone.
func TestAnInterruptedSwapIsFinished(t *testing.T) {
	for _, complete := range []bool{true, false} {
		root := t.TempDir()
		d := New(instance.DriverConfig{DataRoot: root})
		for _, dir := range []string{d.upgradeDir(), d.DataDir() + ".old"} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("17\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if complete {
			if err := os.WriteFile(filepath.Join(d.upgradeDir(), completeMarker), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		has, err := d.HasData()
		if err != nil || has != complete {
			t.Errorf("complete %v: HasData %v, %v", complete, has, err)
		}
		_, errOld := os.Stat(d.DataDir() + ".old")
		_, errUpgrade := os.Stat(d.upgradeDir())
		if complete && (errOld == nil || errUpgrade == nil) {
			t.Errorf("the finished swap left %s.old (%v) or the upgrade directory (%v)", d.DataDir(), errOld, errUpgrade)
		}
		if !complete && (errOld != nil || errUpgrade != nil) {
			t.Errorf("an incomplete upgrade directory was moved: %v, %v", errOld, errUpgrade)
		}
	}
}

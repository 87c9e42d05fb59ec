package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

var _ instance.MajorUpgrader = (*Driver)(nil)

// upgradeDir is where pg_upgrade builds the new major's data directory, on
// the same volume as PGDATA: --link makes hard links, not copies.
func (d *Driver) upgradeDir() string { return d.DataDir() + ".upgrade" }

// serverVersion finds the major of "postgres (PostgreSQL) 17.12 (Debian
// 17.12-0+deb13u1)" and of a server_version setting ("15.18 (Debian ...)").
var serverVersion = regexp.MustCompile(`(?:^|\s)(\d+)\.\d+`)

// majorOf is the major version a version string names, "" when none.
func majorOf(version string) string {
	if m := serverVersion.FindStringSubmatch(version); m != nil {
		return m[1]
	}
	return ""
}

// serverMajor is the major version of this instance's postgres binary.
func (d *Driver) serverMajor() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.major != "" {
		return d.major, nil
	}
	cmd := exec.Command(d.cfg.Bin("postgres"), "--version")
	cmd.Env = instance.CleanEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w", err)
	}
	if d.major = majorOf(string(out)); d.major == "" {
		return "", fmt.Errorf("postgres --version says %q: no major version in it", strings.TrimSpace(string(out)))
	}
	return d.major, nil
}

// dataMajor is the major version the data directory dir was made by
// (PG_VERSION), "" when there is none.
func dataMajor(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// OlderMajor implements instance.MajorUpgrader.
func (d *Driver) OlderMajor() (string, error) {
	if has, err := d.HasData(); err != nil || !has {
		return "", err
	}
	data, err := dataMajor(d.DataDir())
	if err != nil || data == "" {
		return "", err
	}
	server, err := d.serverMajor()
	if err != nil {
		return "", err
	}
	if compareMajors(data, server) < 0 {
		return data, nil
	}
	return "", nil
}

// compareMajors compares two major versions as numbers.
func compareMajors(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// oldBinDir is where the binaries of major old are: beside this server's,
// in the layout Debian's packages (and the official images) install
// majors side by side, /usr/lib/postgresql/<major>/bin.
func (d *Driver) oldBinDir(old, server string) (string, error) {
	newBin := filepath.Dir(d.cfg.Bin("postgres"))
	if !filepath.IsAbs(newBin) {
		return "", fmt.Errorf("no postgres binary found on the path")
	}
	majorDir := filepath.Dir(newBin)
	if filepath.Base(majorDir) != server {
		return "", fmt.Errorf("the server's binaries are in %s, not in a directory of its major %s: mydb finds PostgreSQL %s's beside them only in Debian's layout (/usr/lib/postgresql/<major>/bin)", newBin, server, old)
	}
	dir := filepath.Join(filepath.Dir(majorDir), old, "bin")
	if _, err := os.Stat(filepath.Join(dir, "postgres")); err != nil {
		return "", fmt.Errorf("the image has no PostgreSQL %s server (%s): pg_upgrade needs the old major's binaries beside the new one's "+
			"(Debian: the postgresql-%s package installed beside postgresql-%s; mydb's postgres images carry the majors they upgrade from)", old, filepath.Join(dir, "postgres"), old, server)
	}
	return dir, nil
}

// UpgradeMajor implements instance.MajorUpgrader: pg_upgrade --link from
// the data of an older major into a new data directory initdb made beside
// it with the same settings (encoding, locale, checksums, superuser), then
// mydb's configuration and the settings the old data carried
// (postgresql.auto.conf, spec.parameters), then a rename into place. Until
// the rename the old data is PGDATA and whole: a failure of the upgrade,
// which may have begun to link files, puts back the control file
// pg_upgrade set aside (global/pg_control.old), which is all it changes in
// the old directory. The old directory is removed once the new one is in
// place: its files are the new one's, linked.
func (d *Driver) UpgradeMajor(ctx context.Context) error {
	old, err := d.OlderMajor()
	if err != nil || old == "" {
		return err
	}
	server, err := d.serverMajor()
	if err != nil {
		return err
	}
	oldBin, err := d.oldBinDir(old, server)
	if err != nil {
		return err
	}
	// An upgrade interrupted after pg_upgrade set the old control file
	// aside, and before the new directory took PGDATA's place, never
	// started the new cluster: the old one is whole with it put back.
	if err := d.restoreOldControlFile(); err != nil {
		return err
	}
	control, err := exec.CommandContext(ctx, filepath.Join(oldBin, "pg_controldata"), "-D", d.DataDir()).Output()
	if err != nil {
		return fmt.Errorf("pg_controldata of the PostgreSQL %s data: %w", old, err)
	}
	if state := controlDataField(control, "Database cluster state"); state != "shut down" {
		// pg_upgrade refuses too; say what would get it there.
		return fmt.Errorf("the PostgreSQL %s data was not shut down cleanly (%q): start it once with PostgreSQL %s's image to recover, stop it, then upgrade", old, state, old)
	}
	tmp := d.upgradeDir()
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	initdb := []string{"-D", tmp, "--username=" + superuser,
		"--pwfile=" + filepath.Join(d.cfg.Secrets.Dir, instance.SecretSuperuserPassword),
		"--auth-local=peer", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"}
	if controlDataField(control, "Data page checksum version") != "0" {
		initdb = append(initdb, "--data-checksums")
	} else if compareMajors(server, "18") >= 0 {
		initdb = append(initdb, "--no-data-checksums") // 18 turns them on by default
	}
	if err := d.cfg.Tool(ctx, "initdb", initdb...).Run(); err != nil {
		return fmt.Errorf("initdb of the PostgreSQL %s data directory: %w", server, err)
	}
	if err := writeAuthConfig(tmp, d.cfg.TLSEnabled(), d.cfg.RequireClientTLS); err != nil {
		return err
	}
	// pg_upgrade starts the old server on its own configuration: make its
	// authentication the manager's too (a directory made before a change).
	if err := writeAuthConfig(d.DataDir(), d.cfg.TLSEnabled(), d.cfg.RequireClientTLS); err != nil {
		return err
	}
	// No separate --check: the upgrade runs the same checks before it
	// writes anything, and until it renames the old control file (undone
	// below) it writes only into the new directory.
	var out bytes.Buffer
	cmd := d.cfg.Tool(ctx, "pg_upgrade", "--old-bindir="+oldBin, "--new-bindir="+filepath.Dir(d.cfg.Bin("postgres")),
		"--old-datadir="+d.DataDir(), "--new-datadir="+tmp, "--username="+superuser,
		"--socketdir="+d.cfg.RunDir, "--link", "--jobs=2")
	// It writes its reports into the working directory (before 15) or into
	// the new data directory.
	cmd.Dir, cmd.Stdout, cmd.Stderr = d.cfg.RunDir, &out, &out
	if err := cmd.Run(); err != nil {
		err = fmt.Errorf("pg_upgrade: %w: %s", err, upgradeFailure(out.String()))
		return errors.Join(err, d.restoreOldControlFile(), os.RemoveAll(tmp))
	}
	if err := d.carryOverConfig(tmp); err != nil {
		return errors.Join(err, d.restoreOldControlFile(), os.RemoveAll(tmp))
	}
	// The completion marker, then PGDATA moved aside and the new directory
	// renamed in (ReplaceDir): from here on only the new one may ever start
	// (link mode). A crash between the two renames is finished at the next
	// start (finishInterruptedUpgrade).
	return d.commitDataDir(tmp)
}

// finishInterruptedUpgrade puts in place a complete upgraded data
// directory whose rename into PGDATA a crash interrupted: PGDATA is then
// missing (moved aside, to <PGDATA>.old, whose files are the upgraded
// one's, linked). Without it the instance would look empty.
func (d *Driver) finishInterruptedUpgrade() error {
	if _, err := os.Stat(d.DataDir()); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(filepath.Join(d.upgradeDir(), completeMarker)); err != nil {
		return nil
	}
	if err := os.Rename(d.upgradeDir(), d.DataDir()); err != nil {
		return err
	}
	if err := instance.SyncDir(d.cfg.DataRoot); err != nil {
		return err
	}
	return os.RemoveAll(d.DataDir() + ".old")
}

// restoreOldControlFile undoes what pg_upgrade --link does to the old data
// directory before it links: it renames global/pg_control so that the old
// server can no longer start on files the new one may change.
func (d *Driver) restoreOldControlFile() error {
	control := filepath.Join(d.DataDir(), "global", "pg_control")
	if _, err := os.Stat(control + ".old"); err != nil {
		return nil
	}
	return os.Rename(control+".old", control)
}

// carryOverConfig gives the new data directory mydb's shared settings, as
// a bootstrap does, and what the old one held of the database's own:
// ALTER SYSTEM's postgresql.auto.conf and spec.parameters' live file.
func (d *Driver) carryOverConfig(newDir string) error {
	if err := writeConfig(newDir, d.cfg.TLSEnabled()); err != nil {
		return err
	}
	for _, name := range []string{"postgresql.auto.conf", parametersFile} {
		b, err := os.ReadFile(filepath.Join(d.DataDir(), name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(newDir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// upgradeFileRef finds the files pg_upgrade's output points at for the
// cause of a failure: a log, or the list of what its checks refused.
var upgradeFileRef = regexp.MustCompile(`(?:Consult the last few lines of "([^"]+)"|is in the file:\s+(\S+))`)

// upgradeFailure is what pg_upgrade said of its failure: from the check or
// step that failed on (its last lines when none says so), and the last
// lines of the files it points at, which are in the new data directory
// that a failure removes.
func upgradeFailure(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	from := max(0, len(lines)-6)
	for i, l := range lines {
		// A check's own line ends "fatal" (PostgreSQL 16 and before) or says
		// "failed check: ..." (17); a step's says "*failure*".
		if l = strings.TrimSpace(l); strings.HasSuffix(l, "fatal") || strings.Contains(l, "failed check:") || l == "*failure*" {
			from = i
			break
		}
	}
	var said []string
	for _, l := range lines[from:] {
		if l = strings.TrimSpace(l); l != "" {
			said = append(said, l)
		}
	}
	msg := strings.Join(said, " ")
	for _, m := range upgradeFileRef.FindAllStringSubmatch(out, 3) {
		path := m[1] + m[2]
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		msg += fmt.Sprintf("; %s: %s", filepath.Base(path), instance.LastLines(string(b), 4))
	}
	// One line, its columns' padding gone.
	return strings.Join(strings.Fields(msg), " ")
}

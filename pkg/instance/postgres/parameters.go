package postgres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/parameters"
)

// parametersFile holds the live parameters of spec.parameters, in the data
// directory, included from postgresql.conf: a reload applies them and a
// restart keeps them. Parameters read only at start go on the command line
// (serverArgs), where a reload cannot change them.
const parametersFile = "mydb-parameters.conf"

// includeLine is how postgresql.conf reads parametersFile (a path relative
// to postgresql.conf's own directory).
const includeLine = "include_if_exists = '" + parametersFile + "'"

var _ instance.ParameterSetter = (*Driver)(nil)

// SetParameters implements instance.ParameterSetter: it writes
// parametersFile, makes sure postgresql.conf includes it (data made before
// it existed does not), reloads, and asks the server which lines of the
// file it refused (PostgreSQL logs a bad value and keeps the old one).
func (d *Driver) SetParameters(ctx context.Context, params map[string]string) error {
	path := filepath.Join(d.DataDir(), parametersFile)
	if _, err := os.Stat(path); len(params) == 0 && os.IsNotExist(err) {
		return nil
	}
	var b strings.Builder
	b.WriteString("# spec.parameters that need no restart, written by mydb-instance: edits here are overwritten\n")
	for name, value := range params {
		// Checked again: a name or value off the catalog never reaches
		// the file.
		if msg := parameters.Check("postgres", name, value); msg != "" {
			return fmt.Errorf("%s=%s %s", name, value, msg)
		}
	}
	for _, line := range parameters.Sorted(params) {
		name, value, _ := strings.Cut(line, "=")
		fmt.Fprintf(&b, "%s = '%s'\n", name, strings.ReplaceAll(value, "'", "''"))
	}
	if err := instance.WriteFileAtomic(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	if err := includeParameters(d.DataDir()); err != nil {
		return err
	}
	pool, err := d.adminPool()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// The reload is a signal: done only once the postmaster re-read the
	// files, which this session sees when it re-read them after it (a
	// connection made later gets the new values).
	var loaded time.Time
	if err := conn.QueryRow(ctx, "SELECT pg_conf_load_time()").Scan(&loaded); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := instance.PollUntil(wait, 20*time.Millisecond, func() error {
		var again bool
		if err := conn.QueryRow(wait, "SELECT pg_conf_load_time() > $1", loaded).Scan(&again); err != nil || !again {
			return fmt.Errorf("the configuration is not reloaded yet: %v", err)
		}
		return nil
	}); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, "SELECT name, error FROM pg_file_settings WHERE sourcefile = $1 AND error IS NOT NULL", path)
	if err != nil {
		return err
	}
	defer rows.Close()
	var refused []string
	for rows.Next() {
		var name, why string
		if err := rows.Scan(&name, &why); err != nil {
			return err
		}
		refused = append(refused, fmt.Sprintf("%s (%s)", name, why))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("the server refused %s", strings.Join(refused, "; "))
	}
	return nil
}

// includeParameters appends includeLine to dataDir's postgresql.conf when
// it lacks it.
func includeParameters(dataDir string) error {
	conf := filepath.Join(dataDir, "postgresql.conf")
	old, err := os.ReadFile(conf)
	if err != nil {
		return err
	}
	if bytes.Contains(old, []byte(includeLine)) {
		return nil
	}
	return instance.WriteFileAtomic(conf, append(old, []byte("\n# spec.parameters (mydb-instance)\n"+includeLine+"\n")...), 0o600)
}

package mariadb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// adoptCloneGTID sets gtid_slave_pos to a fresh clone's backup position,
// once: the file goes only after the server persisted the position (in
// mysql.gtid_slave_pos), and before replication starts, so a crash in
// between can neither skip the step nor rewind a replica that applied more.
// It is the mysqlfamily.Server's PrepareFollow.
func (d *Driver) adoptCloneGTID(ctx context.Context, c mysqlfamily.Conn) error {
	path := filepath.Join(d.DataDir, cloneGTIDFile)
	gtid, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Exec(ctx, adoptGTIDStatements(strings.TrimSpace(string(gtid)))...); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return instance.SyncDir(d.DataDir)
}

func adoptGTIDStatements(gtid string) []string {
	return []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL gtid_slave_pos = " + mysqlfamily.QuoteString(gtid)}
}

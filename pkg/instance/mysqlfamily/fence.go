package mysqlfamily

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// FenceStops implements instance.Driver: the fence of the Dialect (read_only;
// MySQL's super_read_only) holds a running server, since the application
// user cannot bypass it, and the replicas keep reading its binlog until they
// have it all.
func (s *Server) FenceStops() bool { return false }

// Fence implements instance.Driver: the Dialect's fence (read_only waits for
// the commits in progress), then the application's sessions end, so an open
// transaction cannot commit and clients reconnect, through the -rw Service,
// to the new primary. The position is the binlog's, which holds every commit.
func (s *Server) Fence(ctx context.Context) (api.Position, error) {
	c, err := s.Admin()
	if err != nil {
		return api.Position{}, err
	}
	if err := c.Exec(ctx, s.Dialect.FenceStatements()...); err != nil {
		return api.Position{}, err
	}
	app, err := s.Cfg.Secrets.Get(instance.SecretUsername)
	if err != nil {
		return api.Position{}, err
	}
	if err := endSessions(ctx, c, app); err != nil {
		return api.Position{}, err
	}
	row, err := c.QueryRow(ctx, s.Dialect.BinlogPositionQuery())
	if err != nil {
		return api.Position{}, err
	}
	return api.Position{GTID: row["gtid"]}, nil
}

// endSessions ends every connection of user.
func endSessions(ctx context.Context, c Conn, user string) error {
	row, err := c.QueryRow(ctx, "SELECT GROUP_CONCAT(id) AS ids FROM information_schema.processlist WHERE user = "+QuoteString(user))
	if err != nil {
		return err
	}
	for _, id := range strings.Split(row["ids"], ",") {
		if id == "" {
			continue
		}
		// 1094: the session ended by itself meanwhile.
		if err := c.Exec(ctx, fmt.Sprintf("KILL CONNECTION %s", id)); err != nil && !isErrno(err, errNoSuchThread) {
			return err
		}
	}
	return nil
}

// errNoSuchThread is ER_NO_SUCH_THREAD.
const errNoSuchThread = 1094

func isErrno(err error, n uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == n
}

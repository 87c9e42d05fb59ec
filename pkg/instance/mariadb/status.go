package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"net"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Probe implements instance.Engine.
func (e *Engine) Probe(ctx context.Context) (instance.Probe, error) {
	var p instance.Probe
	db, err := e.admin()
	if err != nil {
		return p, err
	}
	var readOnly bool
	var current, slave sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@read_only, @@server_id, @@gtid_current_pos, @@gtid_slave_pos").
		Scan(&readOnly, &p.ServerID, &current, &slave); err != nil {
		return p, err
	}
	p.Writable = !readOnly
	p.SystemIdentifier, _ = e.SystemID()
	p.Position.GTID = current.String
	row, err := mysqlfamily.QueryRowMap(ctx, db, e.dialect.ReplicaStatusQuery())
	if err != nil {
		return p, err
	}
	if rs := e.dialect.ParseReplicaStatus(row); rs.Configured {
		p.Position.GTID = slave.String
		p.Streaming = rs.Streaming()
		p.Upstream = net.JoinHostPort(rs.Host, fmt.Sprint(rs.Port))
		p.LagSeconds = rs.SecondsBehind
	}
	return p, nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// SlotName is the physical replication slot of the replica named name on
// its primary: the primary keeps the WAL that replica still needs.
func SlotName(name string) string {
	s := strings.ToLower(name)
	s = regexp.MustCompile(`[^a-z0-9_]`).ReplaceAllString(s, "_")
	s = "mydb_" + s
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// conninfo is the replica's connection to the primary. The password comes
// from the passfile, so postgresql.auto.conf (and pg_stat_wal_receiver)
// never hold it. Over TLS, the primary must prove it is the host named
// (its certificate names its pod IP), with a certificate of the database's
// CA: the password goes to no one else.
//
// While the database serves a certificate of the user's own (spec.tls),
// which names no pod, the primary must prove it is the name that
// certificate is for (the server-name file), reached at its address
// (hostaddr), with a certificate of the user's CA.
func (d *Driver) conninfo(t instance.Topology) string {
	host := "host=" + conninfoValue(t.PrimaryHost)
	if name := d.verifiedName(t); name != "" {
		host = "host=" + conninfoValue(name) + " hostaddr=" + conninfoValue(t.PrimaryHost)
	}
	return host + " " + d.conninfoRest(t)
}

// verifiedName is the name the primary's certificate is verified for when
// it is not its address (a certificate of the user's own).
func (d *Driver) verifiedName(t instance.Topology) string {
	if !d.cfg.TLSEnabled() || net.ParseIP(t.PrimaryHost) == nil {
		return ""
	}
	return d.serverName()
}

// conninfoRest is conninfo but for the host.
func (d *Driver) conninfoRest(t instance.Topology) string {
	ssl := "sslmode=prefer"
	if d.cfg.TLSEnabled() {
		ssl = "sslmode=verify-full sslrootcert=" + conninfoValue(d.cfg.TLS.CAFile)
	}
	return fmt.Sprintf("port=%d user=%s passfile=%s application_name=%s %s connect_timeout=5",
		t.PrimaryPort, api.ReplicationUser, conninfoValue(d.passfile()), conninfoValue(d.cfg.Name), ssl)
}

// serverName is the name of the server certificate of the user's own the
// database serves ("" when it serves the instances' own).
func (d *Driver) serverName() string {
	if d.cfg.TLS.ServerNameFile == "" {
		return ""
	}
	b, err := os.ReadFile(d.cfg.TLS.ServerNameFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// conninfoValue quotes a libpq connection string value when needed.
func conninfoValue(v string) string {
	if v != "" && !strings.ContainsAny(v, ` '\`) {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

// writePassfile writes the replication password where libpq reads it.
func (d *Driver) writePassfile() error {
	pw, err := d.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	return instance.WriteFileAtomic(d.passfile(), []byte(passfileLine(api.ReplicationUser, pw)), 0o600)
}

// passfileLine is a .pgpass line for user on any host, port and database.
func passfileLine(user, password string) string {
	esc := strings.NewReplacer(`\`, `\\`, `:`, `\:`)
	return fmt.Sprintf("*:*:*:%s:%s\n", esc.Replace(user), esc.Replace(password))
}

// ensureSlot creates this replica's slot on t's primary over a replication
// connection (the replication user may; no superuser needed) unless it
// exists. RESERVE_WAL makes the primary keep WAL from now on, so nothing
// between the clone's start and streaming is lost.
func (d *Driver) ensureSlot(ctx context.Context, t instance.Topology) error {
	conn, err := d.replicationConn(ctx, t)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "CREATE_REPLICATION_SLOT "+SlotName(d.cfg.Name)+" PHYSICAL RESERVE_WAL").ReadAll()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object
		return nil
	}
	return err
}

// freshSlot drops this replica's slot on t's primary, if any, and creates
// it anew: a clone starts from now, and an old slot may be invalidated.
func (d *Driver) freshSlot(ctx context.Context, t instance.Topology) error {
	conn, err := d.replicationConn(ctx, t)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// pg_basebackup copies an older major's server too, onto which this
	// one cannot start: a replica waits for its primary's upgrade.
	primary := majorOf(conn.ParameterStatus("server_version"))
	if server, err := d.serverMajor(); err != nil {
		return err
	} else if primary != server {
		return fmt.Errorf("the primary %s runs PostgreSQL %s and this server %s: a replica clones only a primary of its own major version (after the primary's upgrade)", t.Primary, primary, server)
	}
	_, err = conn.Exec(ctx, "DROP_REPLICATION_SLOT "+SlotName(d.cfg.Name)+" WAIT").ReadAll()
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42704") { // undefined_object
		return err
	}
	_, err = conn.Exec(ctx, "CREATE_REPLICATION_SLOT "+SlotName(d.cfg.Name)+" PHYSICAL RESERVE_WAL").ReadAll()
	return err
}

// checkCanCatchUp asks the primary, when the standby is not streaming,
// whether it ever can: data of another system (a stale claim) or a slot
// the primary invalidated (it fell more than max_slot_wal_keep_size behind,
// as a claim kept from an earlier scale-down does) need a clone; a slot
// that is missing is created again.
func (d *Driver) checkCanCatchUp(ctx context.Context, pool *pgxpool.Pool, t instance.Topology) error {
	var streaming bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')").Scan(&streaming); err != nil || streaming {
		return err
	}
	primaryID, state, err := d.primaryState(ctx, t)
	if err != nil {
		return nil // the primary may be down; the walreceiver retries
	}
	if local, err := d.SystemID(); err == nil && primaryID != local {
		return fmt.Errorf("%w: the primary is system %s, this data is of system %s", instance.ErrMustReclone, primaryID, local)
	}
	switch state {
	case slotMissing:
		return d.ensureSlot(ctx, t)
	case slotLost:
		return fmt.Errorf("%w: the primary invalidated slot %s, the WAL this standby needs is gone", instance.ErrMustReclone, SlotName(d.cfg.Name))
	}
	return nil
}

type slotStatus int

const (
	slotOK slotStatus = iota
	slotMissing
	slotLost
)

// primaryState asks t's primary over a replication connection for its
// system identifier (IDENTIFY_SYSTEM) and this replica's slot
// (READ_REPLICATION_SLOT, PostgreSQL 15+): no values means no slot, no
// restart LSN means the primary invalidated it.
func (d *Driver) primaryState(ctx context.Context, t instance.Topology) (string, slotStatus, error) {
	conn, err := d.replicationConn(ctx, t)
	if err != nil {
		return "", slotOK, err
	}
	defer conn.Close(context.Background())
	// The walsender takes one command per query.
	ident, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		return "", slotOK, err
	}
	res, err := conn.Exec(ctx, "READ_REPLICATION_SLOT "+SlotName(d.cfg.Name)).ReadAll()
	if err != nil {
		return "", slotOK, err
	}
	if len(ident) != 1 || len(ident[0].Rows) != 1 || len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 2 {
		return "", slotOK, fmt.Errorf("IDENTIFY_SYSTEM, READ_REPLICATION_SLOT: unexpected answer")
	}
	id, slot := string(ident[0].Rows[0][0]), res[0].Rows[0]
	switch {
	case slot[0] == nil:
		return id, slotMissing, nil
	case slot[1] == nil:
		return id, slotLost, nil
	}
	return id, slotOK, nil
}

func (d *Driver) replicationConn(ctx context.Context, t instance.Topology) (*pgconn.PgConn, error) {
	// pgx knows no hostaddr: it dials the address and verifies the name.
	cfg, err := pgconn.ParseConfig("host=" + conninfoValue(t.PrimaryHost) + " " + d.conninfoRest(t) + " replication=true")
	if err != nil {
		return nil, err
	}
	if name := d.verifiedName(t); name != "" {
		if cfg.TLSConfig != nil {
			cfg.TLSConfig.ServerName = name
		}
		for _, f := range cfg.Fallbacks {
			if f.TLSConfig != nil {
				f.TLSConfig.ServerName = name
			}
		}
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connection to %s: %w", t.Primary, err)
	}
	return conn, nil
}

// Follow implements instance.Driver: when the standby follows another
// server than t's primary, point it there (ALTER SYSTEM and a reload;
// Postgres restarts the walreceiver on a primary_conninfo change).
func (d *Driver) Follow(ctx context.Context, t instance.Topology) error {
	pool, err := d.adminPool()
	if err != nil {
		return err
	}
	var inRecovery bool
	var cur, curSlot string
	err = pool.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('primary_conninfo'), current_setting('primary_slot_name')").
		Scan(&inRecovery, &cur, &curSlot)
	if err != nil {
		return err
	}
	if !inRecovery {
		return errors.New("the server is a primary; it cannot follow without a new clone")
	}
	want, slot := d.conninfo(t), SlotName(d.cfg.Name)
	if cur == want && curSlot == slot {
		return d.checkCanCatchUp(ctx, pool, t)
	}
	d.cfg.Log.Info("pointing the standby at the primary", "primary", t.Primary, "host", t.PrimaryHost, "port", t.PrimaryPort)
	if err := d.writePassfile(); err != nil {
		return err
	}
	if err := d.ensureSlot(ctx, t); err != nil {
		return err
	}
	for _, s := range []string{
		"ALTER SYSTEM SET primary_conninfo = " + quoteLiteral(want),
		"ALTER SYSTEM SET primary_slot_name = " + quoteLiteral(slot),
		"SELECT pg_reload_conf()",
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Promote implements instance.Driver: pg_promote ends recovery on a new
// timeline, which the other standbys follow (recovery_target_timeline is
// 'latest').
func (d *Driver) Promote(ctx context.Context) error {
	pool, err := d.adminPool()
	if err != nil {
		return err
	}
	var inRecovery bool
	if err := pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return err
	}
	if inRecovery {
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return errors.New("pg_promote did not finish within 60s")
		}
	}
	for _, s := range []string{"ALTER SYSTEM RESET primary_conninfo", "ALTER SYSTEM RESET primary_slot_name", "SELECT pg_reload_conf()"} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

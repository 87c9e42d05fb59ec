package mariadb

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlrelay"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// ServeAdminInterface implements instance.AdminInterfaceServer. MariaDB's
// replicas verify their primary by the address they connect to, which a
// certificate of the user's own does not name, and MariaDB has no second
// port with TLS files of its own. So the manager serves one: the relay
// presents the instance's own certificate (for its pod's address, of the
// database's CA) and admits the replication user of another instance of
// the database (its client certificate), relaying the session to the
// engine's port.
func (d *Driver) ServeAdminInterface() (io.Closer, error) {
	if d.cfg.AdminPort <= 0 || !d.cfg.TLSEnabled() || d.cfg.Identity == nil {
		return nil, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(d.cfg.ListenHost, strconv.Itoa(d.cfg.AdminPort)))
	if err != nil {
		return nil, fmt.Errorf("the admin interface: %w", err)
	}
	relay := &mysqlrelay.Relay{
		Engine: net.JoinHostPort(d.cfg.ListenHost, strconv.Itoa(d.cfg.Port)),
		TLS:    d.cfg.Identity.PeerServerConfig(),
		Admit:  admitReplicas,
		Log:    d.cfg.Log.With("component", "admin-interface"),
	}
	go func() {
		if err := relay.Serve(l); err != nil {
			d.cfg.Log.Error("the admin interface stopped", "err", err)
		}
	}()
	return l, nil
}

// admitReplicas admits the replication user of the database's instances.
func admitReplicas(state tls.ConnectionState, user string) error {
	if role, _ := pki.PeerRole(&state); role != pki.RoleInstance {
		return errors.New("the admin interface admits the database's instances only (an instance's client certificate)")
	}
	if user != api.ReplicationUser {
		return fmt.Errorf("the admin interface admits the replication user (%s) only", api.ReplicationUser)
	}
	return nil
}

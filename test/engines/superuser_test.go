//go:build engines

package engines

import (
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/test/instanceproc"
)

// PostgreSQL's superuser logs in only over the pod's unix socket, as the
// manager's OS user (peer authentication): over the network it is refused
// whatever the password. The suite, which runs as root, reaches it the same
// way: through a relay from a loopback port to the instance's socket, run
// as the engine's user, so the server sees that user on its socket.

// relayEnv, set in its environment, makes the test binary a relay:
// "<listen address> <unix socket>".
const relayEnv = "MYDB_ENGINES_SOCKET_RELAY"

// relayMain relays every connection to addr to socket, until the suite
// (its parent) dies.
func relayMain(spec string) int {
	listen, socket, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintln(os.Stderr, "relay: want <address> <socket>:", spec)
		return 2
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() {
			defer c.Close()
			s, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer s.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
			<-done
		}()
	}
}

var relays = struct {
	sync.Mutex
	byNode map[*node]string
	// binary is this test binary, copied where the engines' users may run
	// it (go test builds it in a directory only root may enter).
	binary string
}{byNode: map[*node]string{}}

// superuser opens a pool as PostgreSQL's superuser on n's database
// (appdb when empty), through a relay to n's socket run as the engine's
// user.
func (n *node) superuser(t *testing.T, database string) *sql.DB {
	t.Helper()
	relays.Lock()
	addr, ok := relays.byNode[n]
	if !ok {
		addr = net.JoinHostPort(n.host, strconv.Itoa(freePort(t, n.host)))
		socket := filepath.Join(n.runDir, fmt.Sprintf(".s.PGSQL.%d", n.port))
		if relays.binary == "" {
			self, err := os.Executable()
			if err == nil {
				relays.binary = filepath.Join(root, "engines-relay")
				err = exec.Command("install", "-m", "0755", self, relays.binary).Run()
			}
			if err != nil {
				relays.binary = ""
				relays.Unlock()
				t.Fatal(err)
			}
		}
		p, err := instanceproc.Start(instanceproc.Options{Binary: relays.binary, Env: append(os.Environ(), relayEnv+"="+addr+" "+socket),
			UID: n.c.uid, GID: n.c.gid, Log: filepath.Join(n.c.dir, n.name+"-relay.log")})
		if err != nil {
			relays.Unlock()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Stop(5 * time.Second)
			relays.Lock()
			delete(relays.byNode, n)
			relays.Unlock()
		})
		relays.byNode[n] = addr
		waitFor(t, 10*time.Second, "the socket relay on "+addr, func() error {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	relays.Unlock()
	if database == "" {
		database = "appdb"
	}
	host, port, _ := net.SplitHostPort(addr)
	db, err := sql.Open("pgx", fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable connect_timeout=5", host, port, database))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	return db
}

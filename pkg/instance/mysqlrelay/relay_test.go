package mysqlrelay

import (
	"bytes"
	"crypto/tls"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mydb-dev/mydb/pkg/pki"
)

// fakeEngine answers the connection phase as a MySQL-protocol server with
// TLS and mysql_native_password (accepting any password), then COM_PING.
// It records the user of each session and whether it came over TLS.
type fakeEngine struct {
	l     net.Listener
	cert  tls.Certificate
	users chan string
	// stalled hears when an answer to COM_QUERY could not be written.
	stalled chan struct{}
	// refusal, when set, is an ERR packet sent in place of the greeting.
	refusal atomic.Pointer[[]byte]
}

func startFakeEngine(t *testing.T, cert tls.Certificate) *fakeEngine {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{l: l, cert: cert, users: make(chan string, 16), stalled: make(chan struct{}, 1)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go e.session(c)
		}
	}()
	return e
}

func greetingPacket() []byte {
	const caps = 0x0001 | 0x0200 | clientSSL | 0x8000 // long password, protocol 41, SSL, secure connection
	const upperCaps = 0x0008                          // plugin auth
	g := []byte{10}
	g = append(g, "5.5.5-10.11.6-MariaDB\x00"...)
	g = binary.LittleEndian.AppendUint32(g, 7)
	g = append(g, "abcdefgh"...)
	g = append(g, 0)
	g = binary.LittleEndian.AppendUint16(g, caps)
	g = append(g, 45)
	g = binary.LittleEndian.AppendUint16(g, 2)
	g = binary.LittleEndian.AppendUint16(g, upperCaps)
	g = append(g, 21)
	g = append(g, make([]byte, 10)...)
	g = append(g, "ijklmnopqrst\x00"...)
	g = append(g, "mysql_native_password\x00"...)
	return g
}

func okPacket() []byte { return []byte{0, 0, 0, 2, 0, 0, 0} }

func (e *fakeEngine) session(c net.Conn) {
	defer c.Close()
	if refusal := e.refusal.Load(); refusal != nil {
		_ = writePacket(c, 0, *refusal)
		return
	}
	if err := writePacket(c, 0, greetingPacket()); err != nil {
		return
	}
	request, _, err := readPacket(c)
	if err != nil || len(request) != sslRequestLength {
		return // the relay ended the session before the client's TLS request
	}
	secure := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{e.cert}, MinVersion: tls.VersionTLS12})
	response, seq, err := readPacket(secure)
	if err != nil {
		return
	}
	user, _ := userOf(response)
	e.users <- user
	if err := writePacket(secure, seq+1, okPacket()); err != nil {
		return
	}
	for {
		command, _, err := readPacket(secure)
		if err != nil || len(command) == 0 || command[0] == 1 { // COM_QUIT
			return
		}
		if command[0] == 3 { // COM_QUERY: an answer without end, until the write fails
			for {
				if err := writePacket(secure, 1, make([]byte, 16<<10)); err != nil {
					e.stalled <- struct{}{}
					return
				}
			}
		}
		if err := writePacket(secure, 1, okPacket()); err != nil {
			return
		}
	}
}

type relayFixture struct {
	ca         *pki.KeyPair
	relay      *Relay
	addr       string
	engine     *fakeEngine
	instance   *tls.Certificate // a client certificate of the CA
	serverName string
	log        *syncBuffer
}

// syncBuffer is a log every session may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newRelayFixture(t *testing.T, mutate func(*Relay)) *relayFixture {
	now := time.Now()
	ca, err := pki.NewCA("database CA", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(l pki.Leaf) *tls.Certificate {
		kp, err := ca.Issue(l, now)
		if err != nil {
			t.Fatal(err)
		}
		return kp.TLSCertificate()
	}
	server := leaf(pki.Leaf{CommonName: "db-0", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Lifetime: time.Hour, Server: true})
	client := leaf(pki.Leaf{CommonName: "db-1", Lifetime: time.Hour, Client: true})
	engineCert := leaf(pki.Leaf{CommonName: "db.example.test", DNSNames: []string{"db.example.test"}, Lifetime: time.Hour, Server: true})
	engine := startFakeEngine(t, *engineCert)
	log := &syncBuffer{}

	r := &Relay{
		Engine: engine.l.Addr().String(),
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*server},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool(ca.Cert)},
		Admit: func(state tls.ConnectionState, user string) error {
			if user != "replicator" {
				return errors.New("the admin interface admits the replication user only")
			}
			return nil
		},
		HandshakeTimeout: 2 * time.Second,
		Log:              slog.New(slog.NewTextHandler(log, nil)),
	}
	if mutate != nil {
		mutate(r)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() { _ = r.Serve(l) }()
	return &relayFixture{ca: ca, relay: r, addr: l.Addr().String(), engine: engine, instance: client, serverName: "127.0.0.1", log: log}
}

// ping connects through the relay as user with tlsConfig (nil: no TLS).
func (f *relayFixture) ping(user string, tlsConfig *tls.Config) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, "secret", "tcp", f.addr
	cfg.TLS = tlsConfig
	cfg.Timeout = 5 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	return db.Ping()
}

// waitLogged waits until the relay's log says want: it logs once a
// session is over, which may be after its client read the answer.
func (f *relayFixture) waitLogged(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(f.log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay's log does not say %q:\n%s", want, f.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *relayFixture) clientTLS(cert *tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: pki.Pool(f.ca.Cert), ServerName: f.serverName, MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

func TestRelayAdmitsAVerifiedClientAsAnAdmittedUser(t *testing.T) {
	f := newRelayFixture(t, nil)
	if err := f.ping("replicator", f.clientTLS(f.instance)); err != nil {
		t.Fatalf("the replication user with an instance certificate: %v", err)
	}
	select {
	case user := <-f.engine.users:
		if user != "replicator" {
			t.Errorf("the engine saw user %q over TLS, want the client's, replicator", user)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the engine saw no session")
	}
}

func TestRelayRefuses(t *testing.T) {
	f := newRelayFixture(t, nil)
	other, err := pki.NewCA("another CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Issue(pki.Leaf{CommonName: "db-1", Lifetime: time.Hour, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Presented whatever CAs the relay asks for.
	strangerTLS := f.clientTLS(nil)
	strangerTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return stranger.TLSCertificate(), nil }
	for _, tc := range []struct {
		name, user string
		tls        *tls.Config
		want       string // in the client's error
	}{
		{"no TLS", "replicator", nil, "takes TLS sessions with a client certificate only"},
		// The driver says "invalid connection" for a TLS alert; the
		// relay's log says which.
		{"no client certificate", "replicator", f.clientTLS(nil), "invalid connection"},
		{"a client certificate of another CA", "replicator", strangerTLS, "invalid connection"},
		{"another user", "app", f.clientTLS(f.instance), "Access denied for user 'app': the admin interface admits the replication user only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := f.ping(tc.user, tc.tls)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
	// Every refused session is over once logged; none reached the
	// engine past its greeting.
	f.waitLogged(t, "the client did not ask for TLS")
	f.waitLogged(t, "TLS handshake with the client: tls: client didn't provide a certificate")
	f.waitLogged(t, "TLS handshake with the client: tls: failed to verify certificate")
	f.waitLogged(t, `user \"app\": the admin interface admits the replication user only`)
	select {
	case user := <-f.engine.users:
		t.Errorf("the engine saw a session of %q from a refused client", user)
	default:
	}
}

func TestRelayBoundsItsSessions(t *testing.T) {
	f := newRelayFixture(t, func(r *Relay) { r.MaxSessions = 1 })
	// One session held open: a raw connection that never answers the
	// greeting holds its slot until the handshake times out.
	held, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, _, err := readPacket(held); err != nil {
		t.Fatal(err)
	}
	err = f.ping("replicator", f.clientTLS(f.instance))
	if err == nil || !strings.Contains(err.Error(), "Too many connections") {
		t.Fatalf("a second session while one is relayed: %v, want Too many connections", err)
	}
	// The relay ends the held session once the connection phase has taken
	// HandshakeTimeout (2 s here), which frees the slot.
	_ = held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a session that never answered the greeting, after the handshake timeout: %v, want it ended by the relay", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := f.ping("replicator", f.clientTLS(f.instance)); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("once the held session ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRelayPassesOnTheEnginesRefusal: an engine that refuses the session
// (too many connections) is heard by the client in its own words.
func TestRelayPassesOnTheEnginesRefusal(t *testing.T) {
	f := newRelayFixture(t, nil)
	var refusal bytes.Buffer
	if err := writeError(&refusal, 0, errTooManyConns, stateConnections, "Too many connections"); err != nil {
		t.Fatal(err)
	}
	packet := refusal.Bytes()[4:]
	f.engine.refusal.Store(&packet)
	err := f.ping("replicator", f.clientTLS(f.instance))
	if err == nil || !strings.Contains(err.Error(), "1040") || !strings.Contains(err.Error(), "Too many connections") {
		t.Fatalf("got %v, want the engine's error 1040", err)
	}
	f.waitLogged(t, "the engine refused the session")
}

func TestRelayWithTheEngineDown(t *testing.T) {
	f := newRelayFixture(t, nil)
	f.engine.l.Close()
	err := f.ping("replicator", f.clientTLS(f.instance))
	if err == nil || !strings.Contains(err.Error(), "the engine does not answer") {
		t.Fatalf("got %v, want the engine named", err)
	}
}

func TestPacketParsing(t *testing.T) {
	if !offersTLS(greetingPacket()) {
		t.Error("a greeting with CLIENT_SSL reads as offering no TLS")
	}
	g := greetingPacket()
	end := bytes.IndexByte(g, 0)
	binary.LittleEndian.PutUint16(g[end+1+4+8+1:], 0x0200)
	if offersTLS(g) {
		t.Error("a greeting without CLIENT_SSL reads as offering TLS")
	}
	for _, short := range [][]byte{nil, {10}, {10, 'x', 0, 1, 2}, {0xff, 1, 2}} {
		if offersTLS(short) {
			t.Errorf("%v reads as offering TLS", short)
		}
	}
	response := append(make([]byte, sslRequestLength), "replicator\x00\x14"...)
	if u, err := userOf(response); err != nil || u != "replicator" {
		t.Errorf("userOf = %q, %v", u, err)
	}
	for _, bad := range [][]byte{make([]byte, sslRequestLength), append(make([]byte, sslRequestLength), "unterminated"...)} {
		if _, err := userOf(bad); err == nil {
			t.Errorf("userOf(%q) took it", bad)
		}
	}
	var buf bytes.Buffer
	if err := writePacket(&buf, 3, make([]byte, maxHandshakePacket+1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readPacket(&buf); err == nil {
		t.Error("readPacket took a packet over the bound")
	}
}

// flakyListener fails its first Accept, as a process out of file
// descriptors would.
type flakyListener struct {
	net.Listener
	failed bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, errors.New("accept: too many open files")
	}
	return l.Listener.Accept()
}

func TestRelayOutlivesAFailedAccept(t *testing.T) {
	f := newRelayFixture(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.relay.Serve(&flakyListener{Listener: l}) }()
	f.addr = l.Addr().String()
	if err := f.ping("replicator", f.clientTLS(f.instance)); err != nil {
		t.Fatalf("after a failed accept: %v", err)
	}
	l.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after its listener closed: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Serve goes on after its listener closed")
	}
}

// TestRelayDropsAClientThatStopsReading: a replica that stops reading
// holds nothing past WriteStall: the relay ends the session, and the
// engine's writes fail rather than block.
func TestRelayDropsAClientThatStopsReading(t *testing.T) {
	f := newRelayFixture(t, func(r *Relay) { r.WriteStall = 200 * time.Millisecond })
	raw, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, _, err := readPacket(raw); err != nil {
		t.Fatal(err)
	}
	// The connection phase by hand: a TLS request, then the handshake
	// response over TLS.
	request := binary.LittleEndian.AppendUint32(nil, 0x0200|clientSSL|0x8000)
	request = append(request, make([]byte, sslRequestLength-4)...)
	if err := writePacket(raw, 1, request); err != nil {
		t.Fatal(err)
	}
	secure := tls.Client(raw, f.clientTLS(f.instance))
	if err := writePacket(secure, 2, append(append([]byte{}, request...), "replicator\x00\x00"...)); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := readPacket(secure); err != nil || len(ok) == 0 || ok[0] != 0 {
		t.Fatalf("the handshake: %v, %v", ok, err)
	}
	if err := writePacket(secure, 0, []byte{3, 'S'}); err != nil {
		t.Fatal(err)
	}
	// Now read nothing.
	select {
	case <-f.engine.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine's writes to a client that stopped reading still block after 10 s (WriteStall 200 ms)")
	}
}

// Package mysqlrelay serves a MySQL-protocol port that takes TLS with a
// certificate of its own, admits only the clients it is told to, and
// relays each admitted session to the engine over TLS. It is MariaDB's
// admin interface, which MariaDB lacks and the instance manager serves in
// its place: while the engine's port serves a certificate of the user's
// own, replicas connect here and verify the primary by its address against
// the database's CA, as MySQL's replicas do at MySQL's admin interface.
//
// The relay speaks only the connection phase: it forwards the engine's
// greeting (so the client answers the engine's own scramble), takes the
// client's TLS request itself, reads the user name from the handshake
// response, and then sends the same request and response to the engine
// over a TLS session of its own. From there on it copies bytes.
package mysqlrelay

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

const (
	// clientSSL is CLIENT_SSL of the capability flags: the server offers
	// TLS (greeting) or the client asks for it (its first packet).
	clientSSL = 0x0800
	// sslRequestLength is the payload of a TLS request: capabilities,
	// max packet, character set and 23 reserved bytes.
	sslRequestLength = 32
	// maxHandshakePacket bounds what the relay reads before it admits a
	// client; a handshake packet is a few hundred bytes.
	maxHandshakePacket = 64 << 10

	errHandshake     = 1043 // ER_HANDSHAKE_ERROR
	errAccessDenied  = 1045 // ER_ACCESS_DENIED_ERROR
	errTooManyConns  = 1040 // ER_CON_COUNT_ERROR
	stateAccess      = "28000"
	stateGeneral     = "HY000"
	stateConnections = "08004"
)

// Relay is one relayed port.
type Relay struct {
	// Engine is the engine's address (host:port). The relay connects over
	// TLS without verifying the engine's certificate: it is the engine the
	// manager started, at the address it listens on in the same pod.
	Engine string
	// TLS is what the relay serves; it should require and verify a client
	// certificate, which Admit then judges.
	TLS *tls.Config
	// Admit tells whether the client of a verified TLS session may go on
	// as user; its error is what the client reads, after "Access denied".
	Admit func(state tls.ConnectionState, user string) error
	// MaxSessions bounds the sessions relayed at once (default 16).
	MaxSessions int
	// HandshakeTimeout bounds the connection phase (default 10 s).
	HandshakeTimeout time.Duration
	// WriteStall is how long a write to either side may block before the
	// session ends (default 60 s, MariaDB's net_write_timeout): a client
	// that stops reading holds nothing for longer.
	WriteStall time.Duration
	Log        *slog.Logger

	mu       sync.Mutex
	sessions int
}

// Serve relays the sessions of l until l is closed. Other errors of
// Accept (out of file descriptors, say) are waited out, as net/http does:
// replicas must find the port again once they pass.
func (r *Relay) Serve(l net.Listener) error {
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			r.log().Error("the admin interface could not accept a connection", "err", err, "retryIn", wait.String())
			time.Sleep(wait)
			continue
		}
		wait = 0
		if !r.take() {
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(r.handshakeTimeout()))
				_ = writeError(c, 0, errTooManyConns, stateConnections, fmt.Sprintf("Too many connections: the admin interface relays %d at most", r.maxSessions()))
			}()
			continue
		}
		go func() {
			defer r.release()
			if err := r.relay(c); err != nil {
				r.log().Info("admin interface session refused or ended", "client", c.RemoteAddr().String(), "reason", err.Error())
			}
		}()
	}
}

func (r *Relay) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions >= r.maxSessions() {
		return false
	}
	r.sessions++
	return true
}

func (r *Relay) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions--
}

func (r *Relay) maxSessions() int {
	if r.MaxSessions > 0 {
		return r.MaxSessions
	}
	return 16
}

func (r *Relay) handshakeTimeout() time.Duration {
	if r.HandshakeTimeout > 0 {
		return r.HandshakeTimeout
	}
	return 10 * time.Second
}

func (r *Relay) writeStall() time.Duration {
	if r.WriteStall > 0 {
		return r.WriteStall
	}
	return 60 * time.Second
}

func (r *Relay) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

// relay runs one session; its error says why it was refused or ended
// early (nil for a session either side ended).
func (r *Relay) relay(client net.Conn) error {
	defer client.Close()
	deadline := time.Now().Add(r.handshakeTimeout())
	_ = client.SetDeadline(deadline)

	dialer := net.Dialer{Deadline: deadline, KeepAlive: 30 * time.Second}
	engine, err := dialer.Dial("tcp", r.Engine)
	if err != nil {
		_ = writeError(client, 0, errHandshake, stateGeneral, "the engine does not answer on its port")
		return fmt.Errorf("connecting to the engine: %w", err)
	}
	defer engine.Close()
	_ = engine.SetDeadline(deadline)

	greeting, seq, err := readPacket(engine)
	if err != nil {
		return fmt.Errorf("reading the engine's greeting: %w", err)
	}
	if len(greeting) > 0 && greeting[0] == 0xff {
		// The engine refused the session (too many connections, say):
		// the client reads its error as it is.
		_ = writePacket(client, seq, greeting)
		return fmt.Errorf("the engine refused the session: %q", greeting[min(len(greeting), 9):])
	}
	if !offersTLS(greeting) {
		_ = writeError(client, 0, errHandshake, stateGeneral, "the engine serves no TLS")
		return errors.New("the engine's greeting offers no TLS")
	}
	if err := writePacket(client, seq, greeting); err != nil {
		return err
	}
	request, requestSeq, err := readPacket(client)
	if err != nil {
		return fmt.Errorf("reading the client's first packet: %w", err)
	}
	if len(request) != sslRequestLength || binary.LittleEndian.Uint32(request)&clientSSL == 0 {
		_ = writeError(client, requestSeq+1, errAccessDenied, stateAccess,
			"Access denied: the admin interface takes TLS sessions with a client certificate only")
		return errors.New("the client did not ask for TLS")
	}
	secure := tls.Server(client, r.TLS)
	if err := secure.HandshakeContext(context.Background()); err != nil {
		return fmt.Errorf("TLS handshake with the client: %w", err)
	}
	response, responseSeq, err := readPacket(secure)
	if err != nil {
		return fmt.Errorf("reading the client's handshake response: %w", err)
	}
	user, err := userOf(response)
	if err != nil {
		_ = writeError(secure, responseSeq+1, errHandshake, stateGeneral, "Bad handshake")
		return err
	}
	if err := r.Admit(secure.ConnectionState(), user); err != nil {
		_ = writeError(secure, responseSeq+1, errAccessDenied, stateAccess, fmt.Sprintf("Access denied for user '%s': %v", user, err))
		return fmt.Errorf("user %q: %w", user, err)
	}

	if err := writePacket(engine, requestSeq, request); err != nil {
		return err
	}
	toEngine := tls.Client(engine, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // the engine the manager runs in this pod (Relay.Engine)
	if err := toEngine.HandshakeContext(context.Background()); err != nil {
		_ = writeError(secure, responseSeq+1, errHandshake, stateGeneral, "the engine refused TLS")
		return fmt.Errorf("TLS handshake with the engine: %w", err)
	}
	if err := writePacket(toEngine, responseSeq, response); err != nil {
		return err
	}
	_ = client.SetDeadline(time.Time{})
	_ = engine.SetDeadline(time.Time{})
	r.pipe(secure, toEngine)
	return nil
}

// pipe copies both ways until either side ends, then ends both.
func (r *Relay) pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) {
		_, _ = io.Copy(stallGuard{dst, r.writeStall()}, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go copyTo(a, b)
	go copyTo(b, a)
	<-done
	<-done
}

// stallGuard gives every write its own deadline.
type stallGuard struct {
	net.Conn
	stall time.Duration
}

func (g stallGuard) Write(p []byte) (int, error) {
	if err := g.SetWriteDeadline(time.Now().Add(g.stall)); err != nil {
		return 0, err
	}
	return g.Conn.Write(p)
}

// offersTLS reads a protocol-10 greeting's capability flags: protocol
// version, the NUL-terminated server version, a 4-byte connection id, 8
// bytes of scramble, a filler byte, then the flags' lower two bytes.
func offersTLS(greeting []byte) bool {
	if len(greeting) == 0 || greeting[0] != 10 {
		return false
	}
	end := 1
	for end < len(greeting) && greeting[end] != 0 {
		end++
	}
	at := end + 1 + 4 + 8 + 1
	if at+2 > len(greeting) {
		return false
	}
	return binary.LittleEndian.Uint16(greeting[at:])&clientSSL != 0
}

// userOf reads the user name of a protocol-41 handshake response: it
// follows the 32 bytes a TLS request also holds, NUL-terminated.
func userOf(response []byte) (string, error) {
	if len(response) <= sslRequestLength {
		return "", fmt.Errorf("a handshake response of %d bytes holds no user name", len(response))
	}
	for i, b := range response[sslRequestLength:] {
		if b == 0 {
			return string(response[sslRequestLength : sslRequestLength+i]), nil
		}
	}
	return "", errors.New("the handshake response's user name is not terminated")
}

// readPacket reads one packet: a 3-byte little-endian length, a sequence
// number, the payload.
func readPacket(r io.Reader) ([]byte, byte, error) {
	var header [4]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, 0, err
	}
	n := int(header[0]) | int(header[1])<<8 | int(header[2])<<16
	if n > maxHandshakePacket {
		return nil, 0, fmt.Errorf("a handshake packet of %d bytes: %d at most", n, maxHandshakePacket)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, 0, err
	}
	return payload, header[3], nil
}

func writePacket(w io.Writer, seq byte, payload []byte) error {
	n := len(payload)
	packet := append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
	_, err := w.Write(packet)
	return err
}

// writeError sends an ERR packet, which the client shows as
// "ERROR code (state): message".
func writeError(w io.Writer, seq byte, code uint16, state, message string) error {
	payload := []byte{0xff, byte(code), byte(code >> 8), '#'}
	payload = append(payload, state...)
	payload = append(payload, message...)
	return writePacket(w, seq, payload)
}

// Package tcpproxy is a TCP proxy a test controls, standing where a
// Service's address would be: it forwards each connection it accepts to one
// of its backends in turn, as kube-proxy does to the ready pods behind a
// Service, and it can cut everything off to stand for a network partition.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"slices"
	"sync"
)

// Proxy forwards the connections accepted on its address to its backends.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string // in rotation, as a Service's ready endpoints
	next     int
	cut      bool
	open     map[*forward]struct{}
	stats    Stats
	closed   bool
	serving  sync.WaitGroup // the accept loop and every forward
	closeErr error
}

// Stats counts what the proxy did with the connections it accepted.
type Stats struct {
	// Forwarded connections reached a backend.
	Forwarded int
	// Refused connections were reset at once: accepted during a cut or with
	// no backend in rotation.
	Refused int
	// DialFailures are connections reset because their backend could not
	// be dialled.
	DialFailures int
	// Severed connections were open when a cut reset them.
	Severed int
}

// forward is one accepted connection and the one to its backend.
type forward struct {
	client, backend net.Conn
}

// Listen starts a proxy on addr (host:port; port 0 picks one) forwarding
// to backends.
func Listen(addr string, backends ...string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, backends: slices.Clone(backends), open: map[*forward]struct{}{}}
	p.serving.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Add puts backend in rotation for new connections.
func (p *Proxy) Add(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.backends, backend) {
		p.backends = append(p.backends, backend)
	}
}

// Remove takes backend out of rotation: no new connection goes to it, and
// the open ones go on until either side closes them, as a terminating
// pod's established connections do when its endpoint is removed.
func (p *Proxy) Remove(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = slices.DeleteFunc(p.backends, func(b string) bool { return b == backend })
}

// Backends are the backends in rotation.
func (p *Proxy) Backends() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.backends)
}

// Cut resets every open connection, and until Restore every connection
// accepted, as a partition that answers with resets would.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for f := range p.open {
		reset(f.client)
		reset(f.backend)
		delete(p.open, f)
		p.stats.Severed++
	}
}

// Restore ends a cut: new connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Stats is what the proxy did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops listening, closes every open connection and waits for the
// forwards to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.serving.Wait()
		return p.closeErr
	}
	p.closed = true
	p.closeErr = p.ln.Close()
	for f := range p.open {
		f.client.Close()
		f.backend.Close()
	}
	p.mu.Unlock()
	p.serving.Wait()
	return p.closeErr
}

func (p *Proxy) accept() {
	defer p.serving.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.mu.Lock()
		backend := ""
		if !p.cut && !p.closed && len(p.backends) > 0 {
			backend = p.backends[p.next%len(p.backends)]
			p.next++
		} else {
			p.stats.Refused++
		}
		p.mu.Unlock()
		if backend == "" {
			reset(conn)
			continue
		}
		p.serving.Add(1)
		go p.forward(conn, backend)
	}
}

func (p *Proxy) forward(client net.Conn, backend string) {
	defer p.serving.Done()
	upstream, err := net.Dial("tcp", backend)
	if err != nil {
		p.mu.Lock()
		p.stats.DialFailures++
		p.mu.Unlock()
		reset(client)
		return
	}
	f := &forward{client: client, backend: upstream}
	p.mu.Lock()
	if p.cut || p.closed {
		// Cut while dialling: this one is severed too.
		p.stats.Severed++
		p.mu.Unlock()
		reset(client)
		reset(upstream)
		return
	}
	p.open[f] = struct{}{}
	p.stats.Forwarded++
	p.mu.Unlock()

	// Either direction ending ends both: the protocols proxied here (TLS,
	// HTTP) do not half-close.
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
	client.Close()
	upstream.Close()
	<-done
	p.mu.Lock()
	delete(p.open, f)
	p.mu.Unlock()
}

// reset closes conn with a TCP RST rather than a FIN, so the peer's next
// read or write fails with "connection reset by peer".
func reset(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	conn.Close()
}

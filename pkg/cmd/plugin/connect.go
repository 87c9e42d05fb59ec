package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mydb-dev/mydb/pkg/access"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/spf13/cobra"
)

// connectFlags are the flags connect, psql and mariadb share.
type connectFlags struct {
	role     string
	ttl      time.Duration
	instance string
	address  string
	port     int
	// redial is how long a new local connection waits for the API server
	// to take its tunnel (through a mydb-apiserver restart) before it is
	// closed.
	redial time.Duration
}

func (f *connectFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.role, "role", string(examplev1.CredentialRoleReadOnly), "readonly or readwrite: the short-lived user's role")
	cmd.Flags().DurationVar(&f.ttl, "ttl", time.Hour, "how long the short-lived user logs in")
	cmd.Flags().StringVar(&f.instance, "instance", examplev1.ConnectToPrimary,
		"where the tunnel leads: primary, replica (a ready replica, read only), or an instance's name")
	cmd.Flags().DurationVar(&f.redial, "redial-timeout", 30*time.Second,
		"how long a new connection waits for the API server to open its tunnel (through a restart of mydb-apiserver)")
	cmd.Flags().StringVar(&f.address, "address", "127.0.0.1", "the local address to listen on")
	cmd.Flags().IntVar(&f.port, "port", 0, "the local port to listen on (0: any free one)")
}

// session is a local listener whose connections are tunnelled to an
// instance of a database through mydatabases/connect, and a fresh
// credential.
type session struct {
	listener net.Listener
	// instance is where the first tunnel led.
	instance string
	status   examplev1.MyDatabaseCredentialRequestStatus
	caFile   string
	postgres bool
}

func (o *options) openSession(ctx context.Context, db string, f *connectFlags) (*session, func(), error) {
	c, ns, err := o.client()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	answer, err := requestCredential(ctx, c, ns, db, f.role, f.ttl)
	if err != nil {
		return nil, nil, err
	}
	// Fail now, not at the first client, when the tunnel is refused.
	dial := func(ctx context.Context) (*access.TunnelConn, error) {
		return access.DialTunnel(ctx, cfg, ns, db, f.instance)
	}
	probe, err := dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	probe.Close()
	dir, err := os.MkdirTemp("", "mydb-connect-")
	if err != nil {
		return nil, nil, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, []byte(answer.Status.CACertificate), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.address, fmt.Sprint(f.port)))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	s := &session{listener: ln, instance: probe.Instance, status: answer.Status, caFile: caFile, postgres: answer.Status.Port == 5432}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveTunnels(ctx, ln, func(ctx context.Context) (net.Conn, error) {
			conn, err := access.Redial(ctx, dial, f.redial)
			if err != nil {
				return nil, err
			}
			return conn, nil
		}, o.streams.ErrOut)
	}()
	return s, func() { ln.Close(); wg.Wait(); os.RemoveAll(dir) }, nil
}

// serveTunnels accepts local connections until ln closes, and joins each
// to a tunnel of its own.
func serveTunnels(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error), errOut io.Writer) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		local, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer local.Close()
			remote, err := dial(ctx)
			if err != nil {
				fmt.Fprintf(errOut, "tunnel: %v\n", err)
				return
			}
			access.Join(remote, local, local)
		}()
	}
}

// localPort is the port the session listens on.
func (s *session) localPort() int { return s.listener.Addr().(*net.TCPAddr).Port }

// pgHost is where libpq connects and what it verifies: localhost, which
// the certificates of the database's CA carry for port-forwards; or, when
// the engine serves a certificate of the user's own, its name, reached at
// the local port (hostaddr).
func (s *session) pgHost() (host, hostaddr string) {
	if s.status.ServerName != "" {
		return s.status.ServerName, "127.0.0.1"
	}
	return "localhost", ""
}

// connectionString is what a client needs, verifying the server with the
// CA the credential came with (pgHost).
func (s *session) connectionString() string {
	st := s.status
	if s.postgres {
		host, hostaddr := s.pgHost()
		if hostaddr != "" {
			host += " hostaddr=" + hostaddr
		}
		return fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=verify-full sslrootcert=%s",
			host, s.localPort(), st.Username, st.Password, st.Database, s.caFile)
	}
	return fmt.Sprintf("mariadb --protocol=TCP -h localhost -P %d --ssl-ca=%s --ssl-verify-server-cert -u %s -p%s %s",
		s.localPort(), s.caFile, st.Username, st.Password, st.Database)
}

// clientEnv is the environment of the engine's client for the session.
func (s *session) clientEnv() []string {
	st := s.status
	if s.postgres {
		host, hostaddr := s.pgHost()
		env := []string{"PGHOST=" + host, fmt.Sprintf("PGPORT=%d", s.localPort()), "PGUSER=" + st.Username, "PGPASSWORD=" + st.Password,
			"PGDATABASE=" + st.Database, "PGSSLMODE=verify-full", "PGSSLROOTCERT=" + s.caFile}
		if hostaddr != "" {
			env = append(env, "PGHOSTADDR="+hostaddr)
		}
		return env
	}
	return []string{"MYSQL_PWD=" + st.Password}
}

func (o *options) connectCommand() *cobra.Command {
	f := &connectFlags{}
	cmd := &cobra.Command{
		Use:   "connect DATABASE [--role readonly|readwrite] [--ttl 1h] [--instance primary|replica|NAME] [--port PORT]",
		Short: "Reach a MyDatabase's primary (or a replica) from here through the API server, with a short-lived user",
		Long: "Gets a short-lived database user (mydatabases/credentials), listens on a local port, and tunnels each connection " +
			"to it through the API server (mydatabases/connect) to the primary (or the instance --instance names), then prints " +
			"a connection string and waits until interrupted. Each connection has a tunnel of its own, opened when it is " +
			"made: a restart of mydb-apiserver ends the connections open through it, and new ones wait up to --redial-timeout " +
			"for it to be back. It needs create on mydatabases/credentials (with the role's verb) and on mydatabases/connect: " +
			"no pods/portforward, no Secret, no network path to the pods.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, closeSession, err := o.openSession(ctx, args[0], f)
			if err != nil {
				return err
			}
			defer closeSession()
			fmt.Fprintf(o.streams.Out, "# %s (%s) logs in until %s; tunnelled from %s to %s (%s now). Ctrl-C ends it.\n%s\n",
				s.status.Username, f.role, s.status.ExpirationTimestamp.UTC().Format(time.RFC3339), s.listener.Addr(), f.instance, s.instance,
				s.connectionString())
			<-ctx.Done()
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

// clientCommand is `kubectl mydb psql` or `kubectl mydb mariadb`: the
// engine's client, on the host, through a session.
func (o *options) clientCommand(name string, postgres bool) *cobra.Command {
	f := &connectFlags{}
	cmd := &cobra.Command{
		Use:   name + " DATABASE [--role readonly|readwrite] [--ttl 1h] [--instance primary|replica|NAME] [-- CLIENT ARGS...]",
		Short: "Run " + name + " against a MyDatabase's primary (or a replica) through the API server, as a short-lived user named after you",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, closeSession, err := o.openSession(ctx, args[0], f)
			if err != nil {
				return err
			}
			defer closeSession()
			if s.postgres != postgres {
				return fmt.Errorf("%s is not a database %s speaks to", args[0], name)
			}
			var clientArgs []string
			if !postgres {
				clientArgs = []string{"--protocol=TCP", "-h", "localhost", "-P", fmt.Sprint(s.localPort()), "--ssl-ca=" + s.caFile,
					"--ssl-verify-server-cert", "-u", s.status.Username, s.status.Database}
			}
			client := exec.Command(name, append(clientArgs, args[1:]...)...)
			client.Env = append(os.Environ(), s.clientEnv()...)
			client.Stdin, client.Stdout, client.Stderr = o.streams.In, o.streams.Out, o.streams.ErrOut
			if err := client.Run(); err != nil {
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					return fmt.Errorf("%s exited with code %d", name, exit.ExitCode())
				}
				return err
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

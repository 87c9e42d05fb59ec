// Package command is the mydb-instance command line: flags (with
// environment fallbacks for the pod spec), the engine wiring and the copy
// subcommand the init container runs.
package command

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/kube"
	"github.com/mydb-dev/mydb/pkg/instance/mariadb"
	"github.com/mydb-dev/mydb/pkg/instance/mysql"
	"github.com/mydb-dev/mydb/pkg/instance/postgres"
	"github.com/mydb-dev/mydb/pkg/parameters"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Options are the command's flags.
type Options struct {
	Engine           string
	Name             string
	PodUID           string
	DataRoot         string
	RunDir           string
	ListenHost       string
	ListenLoopback   bool
	Port             int
	AdminPort        int
	StatusAddress    string
	MetricsAddress   string
	SecretsDir       string
	BinDir           string
	TopologyFile     string
	Database         string
	Namespace        string
	Kubeconfig       string
	Restore          bool
	StopTimeout      time.Duration
	MaxReadyLag      time.Duration
	MaxReadyLagBytes int64
	ServerID         uint32
	// ArchiveWAL makes the instance archive its WAL while it is the
	// primary; ArchiveTimeout bounds how long a closed-but-unarchived
	// stretch of an idle primary's WAL may grow.
	ArchiveWAL     bool
	ArchiveTimeout time.Duration
	// RequireClientTLS: clients over the network must use TLS.
	RequireClientTLS   bool
	ArchiveParallelism int
	// CertificateLifetime is how long each of the instance's certificates
	// is valid; it is renewed at two thirds of it.
	CertificateLifetime time.Duration
	// EngineParameters are the --engine-parameter name=value flags: the
	// parameters of spec.parameters the engine reads only when it starts.
	EngineParameters []string
}

// MinCertificateLifetime bounds --certificate-lifetime: with the five
// minutes certificates are backdated by, a renewal then comes every 20 s.
const MinCertificateLifetime = 3 * time.Minute

func (o *Options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Engine, "engine", env("MYDB_ENGINE", ""), "database engine: postgres, mariadb or mysql ($MYDB_ENGINE)")
	fs.StringVar(&o.Name, "name", env("MYDB_NAME", env("POD_NAME", "")), "instance name, such as db-1 ($MYDB_NAME, $POD_NAME)")
	fs.StringVar(&o.PodUID, "pod-uid", env("POD_UID", ""), "the UID of the pod this instance runs in, reported in its status so that a pod made anew under the same name is told apart ($POD_UID)")
	fs.StringVar(&o.DataRoot, "data-root", env("MYDB_DATA_ROOT", ""), "the data volume's mount point; the data lives in a subdirectory ($MYDB_DATA_ROOT)")
	fs.StringVar(&o.RunDir, "run-dir", env("MYDB_RUN_DIR", ""), "directory for sockets and scratch files ($MYDB_RUN_DIR)")
	fs.StringVar(&o.ListenHost, "listen-host", env("MYDB_LISTEN_HOST", env("POD_IP", "")), "address the engine listens on, the pod IP ($MYDB_LISTEN_HOST, $POD_IP)")
	fs.BoolVar(&o.ListenLoopback, "listen-loopback", false, "the engine listens on 127.0.0.1 too, where kubectl port-forward connects (a pod's own loopback; not where instances share one)")
	fs.IntVar(&o.Port, "port", 0, "engine port (default: the engine's usual port)")
	fs.IntVar(&o.AdminPort, "admin-port", 0, "the admin interface, on --listen-host, where replicas and clones connect while clients get a certificate of the user's own; it serves the instance's certificate: MySQL's own, for MariaDB a relay the manager serves to the engine's port (default: 33062 for mysql and mariadb; -1: none)")
	fs.StringVar(&o.StatusAddress, "status-address", env("MYDB_STATUS_ADDRESS", fmt.Sprintf(":%d", api.Port)), "address of the status HTTP server ($MYDB_STATUS_ADDRESS)")
	fs.StringVar(&o.MetricsAddress, "metrics-address", env("MYDB_METRICS_ADDRESS", ""), "address of the metrics server (GET /metrics over TLS, Prometheus' text format); empty: none ($MYDB_METRICS_ADDRESS)")
	fs.StringVar(&o.SecretsDir, "secrets-dir", env("MYDB_SECRETS_DIR", ""), "the mounted instance Secret: the credentials (username, password, database, superuser-password, replication-password) and the database's CA and issuer (ca.crt, issuer.crt, issuer.key) ($MYDB_SECRETS_DIR)")
	fs.StringVar(&o.BinDir, "bin-dir", env("MYDB_BIN_DIR", ""), "directory of the engine's binaries (default: PATH) ($MYDB_BIN_DIR)")
	fs.StringVar(&o.TopologyFile, "topology-file", env("MYDB_TOPOLOGY_FILE", ""), "JSON file with the desired topology, re-read when it changes ($MYDB_TOPOLOGY_FILE)")
	fs.StringVar(&o.Database, "database", env("MYDB_DATABASE", ""), "the MyDatabase this instance belongs to: its status names the primary ($MYDB_DATABASE)")
	fs.StringVar(&o.Namespace, "namespace", env("MYDB_NAMESPACE", env("POD_NAMESPACE", "")), "the MyDatabase's namespace ($MYDB_NAMESPACE, $POD_NAMESPACE)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig to read the MyDatabase with (default: the pod's service account)")
	fs.BoolVar(&o.Restore, "restore", env("MYDB_RESTORE", "") == "true", "the database starts from a backup: a primary without data waits for POST /v1/restore instead of bootstrapping; replicas clone from it ($MYDB_RESTORE=true)")
	fs.DurationVar(&o.StopTimeout, "stop-timeout", 25*time.Second, "how long a clean engine shutdown may take before it is killed")
	fs.DurationVar(&o.MaxReadyLag, "max-ready-lag", 10*time.Second, "a replica lagging more is not ready")
	fs.Int64Var(&o.MaxReadyLagBytes, "max-ready-lag-bytes", 16<<20, "a replica lagging more WAL bytes is not ready (Postgres)")
	fs.Uint32Var(&o.ServerID, "server-id", 0, "MySQL-family server_id (default: the name's ordinal + 1)")
	fs.BoolVar(&o.RequireClientTLS, "require-client-tls", env("MYDB_REQUIRE_CLIENT_TLS", "") == "true", "refuse clients that connect over the network without TLS (PostgreSQL hostssl, MariaDB and MySQL require_secure_transport); the unix socket stays ($MYDB_REQUIRE_CLIENT_TLS=true)")
	fs.BoolVar(&o.ArchiveWAL, "wal-archive", env("MYDB_WAL_ARCHIVE", "") == "true", "archive the WAL (PostgreSQL) or the binary logs (MariaDB, MySQL) while this instance is the primary, to where the controller's PUT /v1/archive says ($MYDB_WAL_ARCHIVE=true)")
	fs.DurationVar(&o.ArchiveTimeout, "archive-timeout", instance.DefaultArchiveTimeout, "with --wal-archive: an idle primary commits a heartbeat and closes its WAL file (PostgreSQL), or closes its binary log (MariaDB), this often, so the recoverable window advances")
	fs.IntVar(&o.ArchiveParallelism, "archive-parallel", 4, "with --wal-archive: how many WAL files are uploaded at once (the one the engine hands over and the next ones it will; 1 for one at a time)")
	fs.StringArrayVar(&o.EngineParameters, "engine-parameter", nil,
		"name=value: an engine parameter of spec.parameters that the engine reads only when it starts, put on its command line (repeated; the controller sets them)")
	fs.DurationVar(&o.CertificateLifetime, "certificate-lifetime", pki.InstanceLifetime,
		"how long each certificate of the instance (its manager's and its engine's) is valid; renewed at two thirds of it, the engine reloading without a restart")
}

// startParameters are the --engine-parameter flags, each checked against
// the engine's catalog again: a value the engine refuses would keep it from
// starting at all.
func (o *Options) startParameters() (map[string]string, error) {
	if len(o.EngineParameters) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, flag := range o.EngineParameters {
		name, value, ok := strings.Cut(flag, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--engine-parameter %q must be name=value", flag)
		}
		if msg := parameters.Check(o.Engine, name, value); msg != "" {
			return nil, fmt.Errorf("--engine-parameter %s=%s: %s", name, value, msg)
		}
		if p, _ := parameters.Lookup(o.Engine, name); !p.Restart {
			return nil, fmt.Errorf("--engine-parameter %s: the engine takes it while it runs, from the database's spec", name)
		}
		out[name] = value
	}
	return out, nil
}

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func (o *Options) validate() error {
	var errs []error
	for flag, v := range map[string]string{"--engine": o.Engine, "--name": o.Name, "--data-root": o.DataRoot,
		"--run-dir": o.RunDir, "--listen-host": o.ListenHost, "--secrets-dir": o.SecretsDir} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", flag))
		}
	}
	switch {
	case o.TopologyFile != "" && o.Database != "":
		errs = append(errs, errors.New("--topology-file and --database are exclusive: the topology comes from one"))
	case o.TopologyFile == "" && o.Database == "":
		errs = append(errs, errors.New("--database (with --namespace) or --topology-file is required"))
	case o.Database != "" && o.Namespace == "":
		errs = append(errs, errors.New("--namespace is required with --database"))
	}
	if o.StopTimeout <= 0 {
		errs = append(errs, errors.New("--stop-timeout must be positive"))
	}
	if o.ArchiveWAL && (o.ArchiveParallelism < 1 || o.ArchiveParallelism > 64) {
		errs = append(errs, errors.New("--archive-parallel must be between 1 and 64"))
	}
	if o.ArchiveWAL && o.ArchiveTimeout < time.Second {
		errs = append(errs, errors.New("--archive-timeout must be at least 1s"))
	}
	if _, err := o.startParameters(); err != nil {
		errs = append(errs, err)
	}
	if o.CertificateLifetime < MinCertificateLifetime {
		errs = append(errs, fmt.Errorf("--certificate-lifetime must be at least %s", MinCertificateLifetime))
	}
	return errors.Join(errs...)
}

// New is the mydb-instance command; ctx ends on SIGTERM or SIGINT.
func New(ctx context.Context) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:           "mydb-instance",
		Short:         "Runs one database instance: bootstrap or clone, run, follow or lead, report",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return run(ctx, o)
		},
	}
	o.addFlags(cmd.Flags())
	cmd.AddCommand(newDumpServer(ctx))
	cmd.AddCommand(newWALCommand(ctx, false), newWALCommand(ctx, true))
	cmd.AddCommand(&cobra.Command{
		Use:   "copy DEST",
		Short: "Copy this executable to DEST (a directory or a file), for an init container",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return copySelf(args[0]) },
	})
	return cmd
}

func run(ctx context.Context, o *Options) error {
	if os.Geteuid() == 0 {
		// The engines refuse root; saying so here beats initdb's message
		// halfway through a bootstrap.
		return errors.New("run as the engine's user, not root (the engines refuse to run as root)")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("instance", o.Name)
	if err := os.MkdirAll(o.RunDir, 0o700); err != nil {
		return err
	}
	serverID := o.ServerID
	if serverID == 0 {
		serverID = ServerIDFromName(o.Name)
	}
	secrets := instance.Secrets{Dir: o.SecretsDir}
	engineTLS := instance.EngineTLSIn(o.RunDir)
	leaf := instance.InstanceLeaf(o.Name, o.Database, o.Namespace, o.ListenHost)
	leaf.Lifetime = o.CertificateLifetime
	identity, err := instance.NewIdentity(secrets, leaf, &engineTLS, log)
	if err != nil {
		return fmt.Errorf("the instance's certificate: %w", err)
	}
	go identity.Run(ctx)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	socket := instance.LocalSocket(o.RunDir)
	startParameters, err := o.startParameters()
	if err != nil {
		return err
	}
	cfg := instance.DriverConfig{
		Name: o.Name, DataRoot: o.DataRoot, RunDir: o.RunDir, ListenHost: o.ListenHost, ListenLoopback: o.ListenLoopback, Port: o.Port, AdminPort: o.AdminPort,
		BinDir: o.BinDir, Secrets: secrets, Identity: identity, TLS: engineTLS, ServerID: serverID,
		ArchiveCommand: walCommand(self, "wal-archive", socket, "%p", "%f"),
		RestoreCommand: restoreCommand(instance.WALPrefetchDir(o.DataRoot), walCommand(self, "wal-restore", socket, "%f", "%p")),
		ArchiveWAL:     o.ArchiveWAL, ArchiveTimeout: o.ArchiveTimeout,
		RequireClientTLS: o.RequireClientTLS,
		StartParameters:  startParameters,
		Stdout:           os.Stdout, Stderr: os.Stdout, Log: log.With("engine", o.Engine),
	}
	driver, err := newDriver(o.Engine, &cfg)
	if err != nil {
		return err
	}
	if os.Getpid() == 1 {
		// A container's first process: no engine of an earlier run of this
		// container survives it, but their lock files do (the run directory
		// and the data are volumes), naming pids this container reuses for
		// its own processes and threads, and the engines then refuse to
		// start ("lock file already exists").
		if err := instance.RemoveStaleLocks(cfg.RunDir, driver); err != nil {
			return err
		}
	}
	topology, err := o.topologySource(cfg.Port, cfg.AdminPort, log)
	if err != nil {
		return err
	}
	m := instance.NewManager(instance.Options{
		Name: o.Name, PodUID: o.PodUID, Engine: o.Engine, DataRoot: o.DataRoot, StatusAddress: o.StatusAddress, MetricsAddress: o.MetricsAddress,
		StopTimeout: o.StopTimeout, MaxReadyLag: o.MaxReadyLag, MaxReadyLagBytes: o.MaxReadyLagBytes,
		Identity:   identity,
		Restore:    o.Restore,
		ArchiveWAL: o.ArchiveWAL, ArchiveTimeout: o.ArchiveTimeout, ArchiveParallelism: o.ArchiveParallelism, LocalSocket: socket,
		Log: log,
	}, driver, topology)

	// A renewed certificate reaches the engine without a restart.
	identity.OnRenew(func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m.ReloadTLS(ctx)
	})

	// SIGHUP is the engines' reload signal: pass it on.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			m.Forward(syscall.SIGHUP)
		}
	}()
	log.Info("starting", "engine", o.Engine, "dataRoot", o.DataRoot, "listen", fmt.Sprintf("%s:%d", o.ListenHost, cfg.Port), "status", o.StatusAddress, "serverID", serverID)
	return m.Run(ctx)
}

// newDriver builds the driver of the engine name selects, defaulting cfg's
// port to the engine's usual one.
func newDriver(name string, cfg *instance.DriverConfig) (instance.Driver, error) {
	if cfg.Port == 0 {
		cfg.Port = map[string]int{"postgres": 5432, "mariadb": 3306, "mysql": 3306}[name]
	}
	if cfg.AdminPort == 0 && (name == "mysql" || name == "mariadb") {
		cfg.AdminPort = 33062 // MySQL's own default; MariaDB's relay takes the same
	}
	cfg.AdminPort = max(cfg.AdminPort, 0)
	switch name {
	case "postgres":
		return postgres.New(*cfg), nil
	case "mariadb":
		return mariadb.New(*cfg), nil
	case "mysql":
		// MySQL 8.4: never run against a real server (docs/instance.md).
		return mysql.New(*cfg), nil
	}
	return nil, fmt.Errorf("--engine %q: must be postgres, mariadb or mysql", name)
}

// topologySource is the topology file, or else the MyDatabase's status.
func (o *Options) topologySource(port, adminPort int, log *slog.Logger) (instance.TopologySource, error) {
	if o.TopologyFile != "" {
		return instance.FileSource{Path: o.TopologyFile, Log: log}, nil
	}
	_, statusPort, err := net.SplitHostPort(o.StatusAddress)
	if err != nil {
		return nil, fmt.Errorf("--status-address: %w", err)
	}
	sp, err := strconv.Atoi(statusPort)
	if err != nil {
		return nil, fmt.Errorf("--status-address: %w", err)
	}
	config, err := rest.InClusterConfig()
	if o.Kubeconfig != "" {
		config, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("reaching the cluster to read MyDatabase %s/%s: %w", o.Namespace, o.Database, err)
	}
	client, err := clientset.NewForConfig(rest.AddUserAgent(config, "mydb-instance"))
	if err != nil {
		return nil, err
	}
	return kube.Source{Client: client, Namespace: o.Namespace, Database: o.Database, Port: port, AdminPort: adminPort, StatusPort: sp, Log: log}, nil
}

var ordinal = regexp.MustCompile(`-(\d+)$`)

// ServerIDFromName derives a MySQL-family server_id from a StatefulSet
// pod name: ordinal + 1 (server_id 0 means "no replication"), unique within
// the database. Other names hash into the range above any ordinal.
func ServerIDFromName(name string) uint32 {
	if m := ordinal.FindStringSubmatch(name); m != nil {
		if n, err := strconv.ParseUint(m[1], 10, 32); err == nil && n < 1<<31 {
			return uint32(n) + 1
		}
	}
	return 1<<31 + crc32.ChecksumIEEE([]byte(name))%(1<<31-1)
}

// copySelf copies the running executable to dest atomically, so a
// container that starts from dest never runs a partial file.
func copySelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		dest = filepath.Join(dest, "mydb-instance")
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := dest + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	fmt.Println("copied", self, "to", dest)
	return nil
}

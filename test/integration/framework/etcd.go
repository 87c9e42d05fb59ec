// Package framework starts the real processes integration tests need: an
// etcd built by hack/build-tools.sh, and mydb-apiserver in-process.
package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mydb-dev/mydb/test/repo"
)

// Etcd is a running etcd server.
type Etcd struct {
	// URL is the client URL, http://127.0.0.1:<port>.
	URL string
	cmd *exec.Cmd
}

// etcdBinary returns $ETCD_BIN or the binary hack/build-tools.sh caches.
func etcdBinary() (string, error) {
	if bin := os.Getenv("ETCD_BIN"); bin != "" {
		return bin, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "_output", "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no etcd at %s (run hack/build-tools.sh etcd, or set ETCD_BIN): %w", bin, err)
	}
	return bin, nil
}

// StartEtcd starts etcd on free loopback ports with its data in dir, and
// waits until it answers.
func StartEtcd(dir string) (*Etcd, error) {
	bin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	logFile, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e := &Etcd{URL: clientURL, cmd: cmd}
	if err := e.waitReady(30 * time.Second); err != nil {
		e.Stop()
		return nil, fmt.Errorf("etcd did not become ready (log: %s): %w", logFile.Name(), err)
	}
	return e, nil
}

func (e *Etcd) waitReady(timeout time.Duration) error {
	client, err := e.Client()
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		_, err := client.Get(attempt, "health")
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Client returns an etcd client of this server.
func (e *Etcd) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{e.URL}, DialTimeout: 5 * time.Second})
}

// Stop kills etcd and waits for it to exit.
func (e *Etcd) Stop() {
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

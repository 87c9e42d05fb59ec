package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/mydb-dev/mydb/pkg/cmd/server"
	"k8s.io/client-go/rest"
)

// Server is mydb-apiserver running in-process.
type Server struct {
	// Config reaches the server as its privileged loopback user.
	Config *rest.Config
	// EtcdPrefix is where the server keeps its objects in etcd.
	EtcdPrefix string
	cancel     context.CancelFunc
	done       chan error
}

// StartServer runs mydb-apiserver against etcdURL with certificates in dir.
// Delegated authentication, authorization and admission need a main
// cluster, so they are off here; the end-to-end suite covers them.
func StartServer(etcdURL, dir string) (*Server, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := server.NewOptions(io.Discard, io.Discard)
	o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{etcdURL}
	o.RecommendedOptions.SecureServing.Listener = listener
	o.RecommendedOptions.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.RecommendedOptions.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "certs")
	o.RecommendedOptions.Authentication = nil
	o.RecommendedOptions.Authorization = nil
	o.RecommendedOptions.CoreAPI = nil
	o.Controller.Enabled = false
	o.RecommendedOptions.Admission = nil
	o.RecommendedOptions.Features.EnablePriorityAndFairness = false
	if err := o.Complete(); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	config, err := o.Config()
	if err != nil {
		return nil, err
	}
	s, err := config.Complete().New()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.GenericAPIServer.PrepareRun().RunWithContext(ctx) }()

	restConfig := rest.CopyConfig(s.GenericAPIServer.LoopbackClientConfig)
	restConfig.Host = "https://" + listener.Addr().String()
	srv := &Server{Config: restConfig, EtcdPrefix: o.RecommendedOptions.Etcd.StorageConfig.Prefix, cancel: cancel, done: done}
	if err := srv.waitHealthy(30 * time.Second); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

func (s *Server) waitHealthy(timeout time.Duration) error {
	client, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(s.Config.Host + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		select {
		case runErr := <-s.done:
			return fmt.Errorf("server exited: %v", runErr)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
	}
}

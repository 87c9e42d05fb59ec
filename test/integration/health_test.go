package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/test/integration/framework"
	"k8s.io/client-go/rest"
)

// TestEtcdOutageMakesUnreadyNotDead: with its own etcd gone, a server
// answers /livez (the kubelet does not restart it) and fails /readyz
// naming etcd (it leaves its Service until etcd is back).
func TestEtcdOutageMakesUnreadyNotDead(t *testing.T) {
	dir := t.TempDir()
	own, err := framework.StartEtcd(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	srv, err := framework.StartServer(own.URL, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	client, err := rest.HTTPClientFor(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(srv.Config.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/livez?verbose"); code != http.StatusOK || strings.Contains(body, "etcd") {
		t.Errorf("/livez: %d\n%s\nwant 200 without an etcd check", code, body)
	}
	if code, body := get("/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]etcd ok") || !strings.Contains(body, "[+]etcd-readiness ok") {
		t.Errorf("/readyz: %d\n%s\nwant 200 with the etcd checks", code, body)
	}

	own.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get("/readyz?verbose")
		if code != http.StatusOK && strings.Contains(body, "[-]etcd") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with etcd gone: %d\n%s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := get("/livez"); code != http.StatusOK {
		t.Errorf("/livez with etcd gone: %d %s, want 200", code, body)
	}
}

//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestARestartedServerIsNeverAnsweredAsAnonymous restarts local-up's
// mydb-apiserver while a client lists MyDatabases through kube-apiserver
// every few milliseconds, with a plain HTTP client (client-go would retry
// a 503 in silence). local-up's APIService reaches mydb through an
// ExternalName Service, which knows nothing of readiness, so requests
// arrive the moment mydb listens, before it has loaded the CAs that
// authenticate the aggregator: they must be answered 503 (the aggregator's
// own while mydb is down, mydb's "starting" after), never 401 or 403, and
// the lists must succeed again once mydb is ready.
func TestARestartedServerIsNeverAnsweredAsAnonymous(t *testing.T) {
	// Not parallel: it restarts local-up's mydb-apiserver.
	cfg := restConfig(t)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := cfg.Host + "/apis/example.com/v1/namespaces/default/mydatabases"
	server := localComponent(t, filepath.Join(repoRoot, "_output", "local"), "mydb-apiserver")
	t.Cleanup(func() { server.ensureRunning(t) })

	server.stop(t)
	server.start(t)
	codes, starting := map[int]int{}, 0
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
		switch resp.StatusCode {
		case http.StatusOK:
			t.Logf("listed again after the restart; answers by code %v, %d of them mydb's own \"starting\"", codes, starting)
			return
		case http.StatusServiceUnavailable:
			if strings.Contains(string(body), "mydb-apiserver is starting") {
				starting++
			}
		default:
			t.Fatalf("a list during mydb's start was answered %d: %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no list succeeded within a minute of mydb's start: answers by code %v", codes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

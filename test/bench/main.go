// Command bench measures mydb on a running control plane (make local-up) and
// prints the figures as a table. Each scenario runs against the cluster the
// kubeconfig names, in a namespace of its own that it deletes afterwards.
//
//	go run ./test/bench -scenario reconcile -n 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", filepath.Join("_output", "local", "kubeconfig"), "kubeconfig of the cluster mydb is aggregated into")
	scenario := flag.String("scenario", "reconcile", "what to measure: reconcile")
	n := flag.Int("n", 100, "number of MyDatabases")
	concurrency := flag.Int("concurrency", 16, "clients creating at once")
	timeout := flag.Duration("timeout", 20*time.Minute, "give up after this long")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	switch *scenario {
	case "reconcile":
		err = runReconcile(ctx, cfg, *n, *concurrency, os.Stdout)
	default:
		err = fmt.Errorf("unknown scenario %q", *scenario)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const leaseName = "mydb-controller"

// TestLeaderFailover runs a second mydb-apiserver beside make local-up's,
// kills the leader with SIGKILL while MyDatabases are being created, and
// checks that the standby takes the lease over within its duration and that
// every MyDatabase ends with exactly one StatefulSet.
func TestLeaderFailover(t *testing.T) {
	// Not parallel: it kills the controllers' leader (local-up's mydb-apiserver).
	ctx := context.Background()
	kube := kubeClient(t)

	sb := startStandby(t)
	leaderPID, leaderIdentity, leaseDuration := sb.leaderPID, sb.leaderIdentity, sb.leaseDuration
	standbyIdentity, standbyConfig := sb.identity, sb.config

	ns := newNamespace(t)
	dbs := mydbClient(t, standbyConfig).ExampleV1().MyDatabases(ns)
	// /readyz waits for the client CAs, so the first request authenticates.
	if _, err := dbs.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("the standby is ready but refused the admin: %v", err)
	}
	const total = 30
	var wg sync.WaitGroup
	createErrs := make(chan error, total)
	// Some creates land before the leader dies, the rest during the failover.
	someCreated := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		pace := time.NewTicker(100 * time.Millisecond)
		defer pace.Stop()
		for i := 0; i < total; i++ {
			db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ha-%02d", i)},
				Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi")}}
			if _, err := dbs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
				createErrs <- err
			}
			if i == 9 {
				close(someCreated)
			}
			<-pace.C
		}
	}()
	<-someCreated
	killed := time.Now()
	if err := syscall.Kill(leaderPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var failover time.Duration
	eventually(t, 2*leaseDuration+10*time.Second, func() error {
		l, err := kube.CoordinationV1().Leases("mydb-system").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != standbyIdentity {
			return fmt.Errorf("lease still held by %q (was %q)", holder, leaderIdentity)
		}
		failover = time.Since(killed)
		return nil
	})
	t.Logf("failover: the standby took the lease %s after the leader was killed (lease duration %s)", failover.Round(10*time.Millisecond), leaseDuration)
	// A killed leader cannot release its lease: the standby must see it
	// expire (the lease duration after it last saw a renewal) and then win
	// it on a retry, and client-go jitters retries of 2s by up to 120%.
	if limit := leaseDuration + 10*time.Second; failover > limit {
		t.Errorf("failover took %s, more than the lease duration %s and two jittered retries (%s)", failover, leaseDuration, limit)
	}

	wg.Wait()
	close(createErrs)
	for err := range createErrs {
		t.Errorf("create: %v", err)
	}
	eventually(t, reconcileTimeout, func() error {
		for i := 0; i < total; i++ {
			name := fmt.Sprintf("ha-%02d", i)
			list, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{
				LabelSelector: labels.Set{"app.kubernetes.io/instance": name}.String()})
			if err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("%s has %d StatefulSets", name, len(list.Items))
			}
		}
		return nil
	})
}

func ready(cfg *rest.Config) error {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	resp, err := client.Get(cfg.Host + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("/readyz: %d", resp.StatusCode)
	}
	return nil
}

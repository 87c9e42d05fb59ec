// Package kube is the instance manager's topology source in a cluster: it
// watches the instance's own MyDatabase, where the controller writes which
// instance is the primary and where each instance serves.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/parameters"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Source watches one MyDatabase. The instance's identity may read only that
// one object, so it lists and watches by name.
//
// It also reads the object with a GET every check period: when no read
// succeeded for failover.FenceAfter (half of the database's
// spec.failoverDelay), it sends the
// last topology with Fence set, so a primary cut off from the API stops
// taking writes before the controller, which waits the whole failoverDelay,
// can promote another instance; the next successful read lifts the fence.
type Source struct {
	Client    clientset.Interface
	Namespace string
	Database  string
	// Port and StatusPort are where every instance of the database serves
	// the engine and its manager's HTTP server.
	Port, StatusPort int
	// AdminPort is MySQL's admin interface on every instance (0: none),
	// where replicas connect while the database serves clients a
	// certificate of the user's own.
	AdminPort int
	Log       *slog.Logger
	// Clock is the source's time (tests pass a fake one); nil is the real clock.
	Clock clock.Clock
}

// Watch implements instance.TopologySource.
func (s Source) Watch(ctx context.Context) <-chan instance.Topology {
	ch := make(chan instance.Topology, 1)
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.Database).String()
	}
	informer := exampleinformers.NewFilteredMyDatabaseInformer(s.Client, s.Namespace, 0, cache.Indexers{}, byName)
	var (
		mu     sync.Mutex
		last   instance.Topology // as sent, with Fence
		seen   instance.Topology // as the database says
		known  bool
		lastOK = s.Clock.Now()
		delay  = examplev1.DefaultFailoverDelay
	)
	sendLocked := func(t instance.Topology) {
		if t == last {
			return
		}
		last = t
		s.Log.Info("topology", "primary", t.Primary, "address", t.PrimaryHost, "targetPrimary", t.TargetPrimary, "fence", t.Fence, "synchronous", t.Synchronous,
			"parameters", parameters.Hash(t.Parameters))
		instance.SendLatest(ch, t)
	}
	observe := func(obj interface{}) {
		db, ok := obj.(*examplev1.MyDatabase)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		lastOK = s.Clock.Now()
		delay = failover.Delay(db.Spec)
		t, ok := TopologyOf(db, s.Port, s.StatusPort, s.AdminPort)
		if !ok {
			return
		}
		seen, known = t, true
		sendLocked(t)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj interface{}) { observe(obj) },
	}); err != nil {
		s.Log.Error("watching the database", "err", err)
		close(ch)
		return ch
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		informer.RunWithContext(ctx)
	}()
	go func() {
		defer wg.Done()
		for {
			mu.Lock()
			period := checkPeriod(delay)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-s.Clock.After(period):
			}
			gctx, cancel := context.WithTimeout(ctx, period)
			db, err := s.Client.ExampleV1().MyDatabases(s.Namespace).Get(gctx, s.Database, metav1.GetOptions{})
			cancel()
			if err == nil {
				observe(db)
				continue
			}
			mu.Lock()
			since := s.Clock.Since(lastOK)
			if known && since > failover.FenceAfter(delay) {
				t := seen
				t.Fence = fmt.Sprintf("the database could not be read for %s (half its failoverDelay): %v", since.Round(time.Second), err)
				if last.Fence == "" {
					sendLocked(t)
				}
			}
			mu.Unlock()
		}
	}()
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// checkPeriod is how often the source reads the database besides its
// watch: a tenth of the failover delay, at least every second.
func checkPeriod(failoverDelay time.Duration) time.Duration {
	return max(time.Second, failoverDelay/10)
}

// TopologyOf reads the topology the controller wrote into db's status: the
// current primary and the address its pod serves on. It is false while the
// primary has no address yet. Synchronous is spec.replication.mode Sync: the
// instance reads the spec itself, so the controller passes nothing for it.
// With a server certificate of the user's own (which names no pod
// address), replicas connect to the primary's admin port where there is
// one (MySQL), which serves the instance's certificate.
func TopologyOf(db *examplev1.MyDatabase, port, statusPort, adminPort int) (instance.Topology, bool) {
	primary := db.Status.CurrentPrimary
	live, _ := parameters.Split(string(db.Spec.Engine), db.Spec.Parameters)
	for _, in := range db.Status.Instances {
		if in.Name != primary || in.Address == "" {
			continue
		}
		if db.Spec.TLS == nil || db.Spec.TLS.ServerCertificateSecret == "" {
			adminPort = 0
		}
		return instance.Topology{
			PrimaryAdminPort: adminPort,
			Primary:          primary,
			PrimaryHost:      in.Address,
			PrimaryPort:      port,
			PrimaryStatusURL: "https://" + net.JoinHostPort(in.Address, strconv.Itoa(statusPort)),
			TargetPrimary:    db.Status.TargetPrimary,
			Synchronous:      db.Spec.Replication != nil && db.Spec.Replication.Mode == examplev1.ReplicationModeSync,
			Parameters:       parameters.Encode(live),
		}, true
	}
	return instance.Topology{}, false
}

// Package kube is the instance manager's topology source in a cluster: it
// watches the instance's own MyDatabase, where the controller writes which
// instance is the primary and where each instance serves.
package kube

import (
	"context"
	"log/slog"
	"net"
	"strconv"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
)

// Source watches one MyDatabase. The instance's identity may read only that
// one object, so it lists and watches by name.
type Source struct {
	Client    clientset.Interface
	Namespace string
	Database  string
	// Port and StatusPort are where every instance of the database serves
	// the engine and its manager's HTTP server.
	Port, StatusPort int
	Log              *slog.Logger
}

// Watch implements instance.TopologySource.
func (s Source) Watch(ctx context.Context) <-chan instance.Topology {
	ch := make(chan instance.Topology, 1)
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.Database).String()
	}
	informer := exampleinformers.NewFilteredMyDatabaseInformer(s.Client, s.Namespace, 0, cache.Indexers{}, byName)
	var last instance.Topology
	send := func(obj interface{}) {
		db, ok := obj.(*examplev1.MyDatabase)
		if !ok {
			return
		}
		t, ok := TopologyOf(db, s.Port, s.StatusPort)
		if !ok || t == last {
			return
		}
		last = t
		s.Log.Info("topology", "primary", t.Primary, "address", t.PrimaryHost)
		instance.SendLatest(ch, t)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    send,
		UpdateFunc: func(_, obj interface{}) { send(obj) },
	}); err != nil {
		s.Log.Error("watching the database", "err", err)
		close(ch)
		return ch
	}
	go func() {
		defer close(ch)
		informer.RunWithContext(ctx)
	}()
	return ch
}

// TopologyOf reads the topology the controller wrote into db's status: the
// current primary and the address its pod serves on. It is false while the
// primary has no address yet.
func TopologyOf(db *examplev1.MyDatabase, port, statusPort int) (instance.Topology, bool) {
	primary := db.Status.CurrentPrimary
	for _, in := range db.Status.Instances {
		if in.Name != primary || in.Address == "" {
			continue
		}
		return instance.Topology{
			Primary:          primary,
			PrimaryHost:      in.Address,
			PrimaryPort:      port,
			PrimaryStatusURL: "http://" + net.JoinHostPort(in.Address, strconv.Itoa(statusPort)),
		}, true
	}
	return instance.Topology{}, false
}

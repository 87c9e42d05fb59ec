// Package scaled carries the MyDatabase a /scale request changes in the
// request's context. Admission of mydatabases/scale sees Scales, as for
// built-in workloads; the admission plugins that must know what a scale
// does to the whole database (quota: a new replica is a new claim and a new
// pod; LimitRange: new pods are bounded) find the database before and after
// the change here. The registry's ScaleREST sets it, admission reads it, and
// neither imports the other. It imports nothing of mydb's but the internal
// API types.
package scaled

import (
	"context"

	"github.com/mydb-dev/mydb/pkg/apis/example"
)

type key struct{}

// Databases are the MyDatabase a /scale update changes: Old is stored, New
// is what the request makes of it.
type Databases struct {
	New, Old *example.MyDatabase
}

// With returns ctx carrying the databases of a /scale update.
func With(ctx context.Context, d Databases) context.Context {
	return context.WithValue(ctx, key{}, d)
}

// From returns the databases of the /scale update ctx belongs to; false
// when ctx is not a /scale update's.
func From(ctx context.Context) (Databases, bool) {
	d, ok := ctx.Value(key{}).(Databases)
	return d, ok
}

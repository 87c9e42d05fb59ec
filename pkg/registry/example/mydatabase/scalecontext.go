package mydatabase

import (
	"context"

	"github.com/mydb-dev/mydb/pkg/apis/example"
)

// Admission of mydatabases/scale sees Scales, as for built-in workloads;
// admission plugins that must know what a scale does to the whole database
// (quota: a new replica is a new claim and a new pod) find the MyDatabase
// before and after the change in the request's context.

type scaledKey struct{}

// Scaled is the MyDatabase a /scale request changes: Old is stored, New is
// what the request makes of it.
type Scaled struct {
	New, Old *example.MyDatabase
}

// WithScaled returns ctx carrying the databases of a /scale update.
func WithScaled(ctx context.Context, s Scaled) context.Context {
	return context.WithValue(ctx, scaledKey{}, s)
}

// ScaledFrom returns the databases of the /scale update ctx belongs to.
func ScaledFrom(ctx context.Context) (Scaled, bool) {
	s, ok := ctx.Value(scaledKey{}).(Scaled)
	return s, ok
}

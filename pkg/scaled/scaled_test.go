package scaled

import (
	"context"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
)

func TestFromFindsWhatWithSet(t *testing.T) {
	old, db := &example.MyDatabase{}, &example.MyDatabase{}
	got, ok := From(With(context.Background(), Databases{New: db, Old: old}))
	if !ok || got.New != db || got.Old != old {
		t.Errorf("From = %+v, %v; want the new and old databases", got, ok)
	}
	if _, ok := From(context.Background()); ok {
		t.Error("From found databases in a plain context")
	}
}

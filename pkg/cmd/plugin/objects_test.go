package plugin

import (
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

// TestPrintObjects: kubectl mydb status lists status.roles with each one's
// state, its password's Secret version and why it waits or failed, and
// prints nothing for a database without them.
func TestPrintObjects(t *testing.T) {
	var b strings.Builder
	printObjects(&b, "Roles:", []examplev1.ManagedObjectStatus{
		{Name: "alice", State: examplev1.ManagedObjectPresent, PasswordSecretVersion: "7"},
		{Name: "bob", State: examplev1.ManagedObjectPending, Message: `Secret "bob-password" does not exist`},
	})
	want := "Roles:\n" +
		"  alice                Present  password of Secret version 7\n" +
		"  bob                  Pending  Secret \"bob-password\" does not exist\n"
	if b.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printObjects(&b, "Databases:", nil)
	if b.Len() != 0 {
		t.Errorf("printed %q for no databases", b.String())
	}
}

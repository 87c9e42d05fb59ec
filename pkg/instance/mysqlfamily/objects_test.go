package mysqlfamily

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestGrants(t *testing.T) {
	app := App{User: "app", Database: "app"}
	req := api.ObjectsRequest{
		Databases: []api.DatabaseObject{{Name: "orders", Owner: "alice"}, {Name: "stock"}, {Name: "old", Absent: true}},
		Roles: []api.RoleObject{
			{Name: "alice", Password: "p", Privileges: map[string]api.Access{"app": api.AccessReadOnly, "orders": api.AccessReadOnly}},
			{Name: "bob", Password: "p", Privileges: map[string]api.Access{"stock": api.AccessReadWrite, "old": api.AccessAll}},
			{Name: "gone", Absent: true},
		},
	}
	want := []Grant{
		{User: "alice", Database: "app", Access: api.AccessReadOnly},
		{User: "bob", Database: "app", Access: api.AccessNone},
		// The owner has everything, whatever else it was given.
		{User: "app", Database: "orders", Access: api.AccessNone},
		{User: "alice", Database: "orders", Access: api.AccessAll},
		{User: "bob", Database: "orders", Access: api.AccessNone},
		// Owned by the application user by default.
		{User: "app", Database: "stock", Access: api.AccessAll},
		{User: "alice", Database: "stock", Access: api.AccessNone},
		{User: "bob", Database: "stock", Access: api.AccessReadWrite},
		// A database to drop leaves nobody any privilege on its name.
		{User: "app", Database: "old", Access: api.AccessNone},
		{User: "alice", Database: "old", Access: api.AccessNone},
		{User: "bob", Database: "old", Access: api.AccessNone},
	}
	if diff := cmp.Diff(want, Grants(app, req)); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
}

func TestHeldAccess(t *testing.T) {
	row := func(held ...string) map[string]string {
		r := map[string]string{"Host": "%", "Db": "orders", "User": "alice"}
		for _, c := range []string{"Select_priv", "Insert_priv", "Update_priv", "Delete_priv", "Create_priv", "Drop_priv", "Grant_priv", "Show_view_priv", "Alter_priv"} {
			r[c] = "N"
		}
		for _, c := range held {
			r[c] = "Y"
		}
		return r
	}
	for _, tc := range []struct {
		row  map[string]string
		want api.Access
	}{
		{nil, api.AccessNone},
		{row(), api.AccessNone},
		{row("Select_priv", "Show_view_priv"), api.AccessReadOnly},
		{row("Select_priv", "Show_view_priv", "Insert_priv", "Update_priv", "Delete_priv"), api.AccessReadWrite},
		// WITH GRANT OPTION is no level's.
		{row("Select_priv", "Insert_priv", "Update_priv", "Delete_priv", "Create_priv", "Drop_priv", "Show_view_priv", "Alter_priv"), api.AccessAll},
		{row("Select_priv"), "custom"},
		{row("Select_priv", "Show_view_priv", "Insert_priv"), "custom"},
	} {
		if got := heldAccess(tc.row); got != tc.want {
			t.Errorf("heldAccess(%v) = %q, want %q", tc.row, got, tc.want)
		}
	}
}

func TestADatabaseNameIsNoWildcardInAGrant(t *testing.T) {
	if got := grantDatabase("orders_2024"); got != `orders\_2024` {
		t.Errorf("grantDatabase = %q", got)
	}
	if got := CreateDatabaseStatement(api.DatabaseObject{Name: "orders", CharacterSet: "utf8mb4", Collation: "utf8mb4_bin"}); got != "CREATE DATABASE IF NOT EXISTS `orders` CHARACTER SET `utf8mb4` COLLATE `utf8mb4_bin`" {
		t.Errorf("CreateDatabaseStatement = %q", got)
	}
}

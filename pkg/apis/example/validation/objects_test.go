package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func withObjects(databases []example.DatabaseSpec, roles []example.RoleSpec) func(*example.MyDatabase) {
	return func(d *example.MyDatabase) { d.Spec.Databases, d.Spec.Roles = databases, roles }
}

func role(name string, privileges ...example.DatabasePrivilege) example.RoleSpec {
	return example.RoleSpec{Name: name, Ensure: example.EnsurePresent, Privileges: privileges,
		PasswordSecret: &example.SecretKeySelector{Name: strings.ReplaceAll(name, "_", "-") + "-password", Key: "password"}}
}

func database(name, owner string) example.DatabaseSpec {
	return example.DatabaseSpec{Name: name, Owner: owner, Ensure: example.EnsurePresent}
}

func TestValidateRolesAndDatabases(t *testing.T) {
	ro := func(db string) example.DatabasePrivilege {
		return example.DatabasePrivilege{Database: db, Access: example.DatabaseAccessReadOnly}
	}
	tests := []struct {
		name      string
		databases []example.DatabaseSpec
		roles     []example.RoleSpec
		want      []errorSummary
	}{
		{name: "none"},
		{name: "a database owned by a role that another reads, and the application's read",
			databases: []example.DatabaseSpec{database("orders", "orders_owner")},
			roles:     []example.RoleSpec{role("orders_owner"), role("reporting", ro("orders"), ro("app"))}},
		{name: "a role and a database to drop: no password needed",
			databases: []example.DatabaseSpec{{Name: "old", Ensure: example.EnsureAbsent}},
			roles:     []example.RoleSpec{{Name: "gone", Ensure: example.EnsureAbsent}}},
		{name: "names at their longest",
			databases: []example.DatabaseSpec{database("d"+strings.Repeat("x", MaxDatabaseNameLength-1), "")},
			roles:     []example.RoleSpec{role("r" + strings.Repeat("x", MaxRoleNameLength-1))}},
		{name: "names too long",
			databases: []example.DatabaseSpec{database("d"+strings.Repeat("x", MaxDatabaseNameLength), "")},
			roles:     []example.RoleSpec{role("r" + strings.Repeat("x", MaxRoleNameLength))},
			want:      []errorSummary{{field.ErrorTypeTooLong, "spec.databases[0].name"}, {field.ErrorTypeTooLong, "spec.roles[0].name"}}},
		{name: "names an engine would need quoted",
			databases: []example.DatabaseSpec{database("Orders", "")},
			roles:     []example.RoleSpec{role("a-b"), role("1st")},
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.databases[0].name"}, {field.ErrorTypeInvalid, "spec.roles[0].name"},
				{field.ErrorTypeInvalid, "spec.roles[1].name"}}},
		{name: "the engines', mydb's and the application's own names",
			databases: []example.DatabaseSpec{database("app", ""), database("mysql", ""), database("template1", ""), database("mydb_meta", "")},
			roles:     []example.RoleSpec{role("app"), role("postgres"), role("root"), role("replicator"), role("pg_monitor"), role("k8s_x"), role("mydb_readonly"), role("public")},
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.databases[0].name"}, {field.ErrorTypeInvalid, "spec.databases[1].name"},
				{field.ErrorTypeInvalid, "spec.databases[2].name"}, {field.ErrorTypeInvalid, "spec.databases[3].name"},
				{field.ErrorTypeInvalid, "spec.roles[0].name"}, {field.ErrorTypeInvalid, "spec.roles[1].name"}, {field.ErrorTypeInvalid, "spec.roles[2].name"},
				{field.ErrorTypeInvalid, "spec.roles[3].name"}, {field.ErrorTypeInvalid, "spec.roles[4].name"}, {field.ErrorTypeInvalid, "spec.roles[5].name"},
				{field.ErrorTypeInvalid, "spec.roles[6].name"}, {field.ErrorTypeInvalid, "spec.roles[7].name"}}},
		{name: "twice the same",
			databases: []example.DatabaseSpec{database("orders", ""), database("orders", "")},
			roles:     []example.RoleSpec{role("alice"), role("alice")},
			want:      []errorSummary{{field.ErrorTypeDuplicate, "spec.databases[1].name"}, {field.ErrorTypeDuplicate, "spec.roles[1].name"}}},
		{name: "an owner the spec does not keep",
			databases: []example.DatabaseSpec{database("orders", "nobody"), database("stock", "gone")},
			roles:     []example.RoleSpec{{Name: "gone", Ensure: example.EnsureAbsent}},
			want:      []errorSummary{{field.ErrorTypeInvalid, "spec.databases[0].owner"}, {field.ErrorTypeInvalid, "spec.databases[1].owner"}}},
		{name: "privileges on a database the spec does not keep, twice, of an unknown level",
			databases: []example.DatabaseSpec{{Name: "old", Ensure: example.EnsureAbsent}},
			roles: []example.RoleSpec{role("alice", ro("elsewhere"), ro("old"), ro("app"), ro("app"),
				example.DatabasePrivilege{Database: "old2", Access: "Admin"})},
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.roles[0].privileges[0].database"}, {field.ErrorTypeInvalid, "spec.roles[0].privileges[1].database"},
				{field.ErrorTypeDuplicate, "spec.roles[0].privileges[3].database"}, {field.ErrorTypeInvalid, "spec.roles[0].privileges[4].database"},
				{field.ErrorTypeNotSupported, "spec.roles[0].privileges[4].access"}}},
		{name: "no password, one of the database's own Secrets, a bad key, a limit of 0, an unknown ensure",
			roles: []example.RoleSpec{{Name: "a", Ensure: example.EnsurePresent},
				{Name: "b", Ensure: example.EnsurePresent, PasswordSecret: &example.SecretKeySelector{Name: "prod-mysql-credentials", Key: "password"}},
				{Name: "c", Ensure: example.EnsurePresent, PasswordSecret: &example.SecretKeySelector{Name: "c", Key: "a/b"}, ConnectionLimit: ptr.To[int32](0)},
				{Name: "d", Ensure: "Maybe"}},
			want: []errorSummary{{field.ErrorTypeRequired, "spec.roles[0].passwordSecret"}, {field.ErrorTypeInvalid, "spec.roles[1].passwordSecret.name"},
				{field.ErrorTypeInvalid, "spec.roles[2].passwordSecret.key"}, {field.ErrorTypeInvalid, "spec.roles[2].connectionLimit"},
				{field.ErrorTypeNotSupported, "spec.roles[3].ensure"}}},
		{name: "a character set and a collation that are no names",
			databases: []example.DatabaseSpec{{Name: "x", Ensure: example.EnsurePresent, CharacterSet: "utf8; DROP", Collation: "en US"}},
			want:      []errorSummary{{field.ErrorTypeInvalid, "spec.databases[0].characterSet"}, {field.ErrorTypeInvalid, "spec.databases[0].collation"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(ValidateMyDatabase(myDatabase(withObjects(tc.databases, tc.roles))))
			if diff := cmp.Diff(tc.want, got, sortSummaries, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestADatabaseKeepsItsCharacterSetAndCollation(t *testing.T) {
	made := example.DatabaseSpec{Name: "orders", Ensure: example.EnsurePresent, CharacterSet: "UTF8", Collation: "C"}
	changed := made
	changed.CharacterSet, changed.Collation = "LATIN1", "C.UTF-8"
	dropped := made
	dropped.Ensure = example.EnsureAbsent
	old := myDatabase(asPostgres, withObjects([]example.DatabaseSpec{made}, nil))
	got := summarize(ValidateMyDatabaseUpdate(myDatabase(asPostgres, withObjects([]example.DatabaseSpec{changed}, nil)), old))
	want := []errorSummary{{field.ErrorTypeInvalid, "spec.databases[0].characterSet"}, {field.ErrorTypeInvalid, "spec.databases[0].collation"}}
	if diff := cmp.Diff(want, got, sortSummaries); diff != "" {
		t.Errorf("a change of a made database (-want +got):\n%s", diff)
	}
	// Dropped, then made anew: it may be made with others.
	if errs := ValidateMyDatabaseUpdate(myDatabase(asPostgres, withObjects([]example.DatabaseSpec{dropped}, nil)), old); len(errs) > 0 {
		t.Errorf("dropping it: %v", errs)
	}
	if errs := ValidateMyDatabaseUpdate(myDatabase(asPostgres, withObjects([]example.DatabaseSpec{changed}, nil)),
		myDatabase(asPostgres, withObjects([]example.DatabaseSpec{dropped}, nil))); len(errs) > 0 {
		t.Errorf("making a dropped one anew: %v", errs)
	}
}

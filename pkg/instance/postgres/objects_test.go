package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestScramMatches(t *testing.T) {
	stored, err := scramVerifier("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stored, password string
		want             bool
	}{
		{stored, "correct horse", true},
		{stored, "correct horse ", false},
		{stored, "", false},
		{"md5abcdef", "correct horse", false},
		{"SCRAM-SHA-256$x:abc$a:b", "correct horse", false},
		{"SCRAM-SHA-256$4096:!!$a:b", "correct horse", false},
		{"", "correct horse", false},
	} {
		if got := scramMatches(tc.stored, tc.password); got != tc.want {
			t.Errorf("scramMatches(%q, %q) = %v", tc.stored, tc.password, got)
		}
	}
}

// TestPrivilegeStatements: every level first takes all away, then gives
// its own, in every schema and by default for what the owner makes.
func TestPrivilegeStatements(t *testing.T) {
	schemas := []string{"public", "Sales"}
	none := privilegeStatements("orders", "alice", schemas, "bob", api.AccessNone)
	for _, s := range none {
		if !strings.Contains(s, "REVOKE") {
			t.Errorf("no access grants: %s", s)
		}
	}
	ro := privilegeStatements("orders", "alice", schemas, "bob", api.AccessReadOnly)
	if !slices.Equal(ro[:len(none)], none) {
		t.Errorf("a level does not start by taking all away")
	}
	for _, want := range []string{
		`GRANT CONNECT, TEMPORARY ON DATABASE "orders" TO "bob"`,
		`GRANT SELECT ON ALL TABLES IN SCHEMA "Sales" TO "bob"`,
		`ALTER DEFAULT PRIVILEGES FOR ROLE "alice" GRANT SELECT ON TABLES TO "bob"`,
	} {
		if !slices.Contains(ro, want) {
			t.Errorf("ReadOnly lacks %s", want)
		}
	}
	for _, s := range ro[len(none):] {
		for _, write := range []string{"INSERT", "UPDATE", "DELETE", "ALL"} {
			if strings.Contains(s, write) && !strings.Contains(s, "ALL TABLES") && !strings.Contains(s, "ALL SEQUENCES") && !strings.Contains(s, "ALL FUNCTIONS") {
				t.Errorf("ReadOnly grants %s: %s", write, s)
			}
		}
	}
	rw := privilegeStatements("orders", "alice", schemas, "bob", api.AccessReadWrite)
	if !slices.Contains(rw, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "public" TO "bob"`) {
		t.Errorf("ReadWrite: %v", rw[len(none):])
	}
	all := privilegeStatements("orders", "alice", schemas, "bob", api.AccessAll)
	if !slices.Contains(all, `GRANT ALL ON SCHEMA "public" TO "bob"`) {
		t.Errorf("All: %v", all[len(none):])
	}
}

package plugin

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

// TestPrintedCredentialsAreShellSafe: what the command prints, evaluated by
// a real shell, sets the client's environment to the answer's values, a
// quote in a value included.
func TestPrintedCredentialsAreShellSafe(t *testing.T) {
	s := examplev1.MyDatabaseCredentialRequestStatus{Username: "k8s_alice_0a1b2c3d", Password: `it's"$HOME`, Host: "shop-rw.ns.svc",
		Port: 5432, Database: "shop"}
	var out bytes.Buffer
	printCredential(&out, examplev1.EnginePostgres, s, "/tmp/ca.crt")
	got, err := exec.Command("sh", "-c", out.String()+`printf '%s|%s|%s|%s|%s' "$PGUSER" "$PGPASSWORD" "$PGHOST" "$PGSSLMODE" "$PGSSLROOTCERT"`).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := strings.Join([]string{s.Username, s.Password, s.Host, "verify-full", "/tmp/ca.crt"}, "|"); string(got) != want {
		t.Errorf("the shell read %q, want %q", got, want)
	}
}

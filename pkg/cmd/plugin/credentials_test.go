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

// TestPrintedCredentialsNameTheServersCertificate: with a certificate of
// the user's own, the client connects to the name it is verified by.
func TestPrintedCredentialsNameTheServersCertificate(t *testing.T) {
	s := examplev1.MyDatabaseCredentialRequestStatus{Username: "k8s_alice_0a1b2c3d", Password: "pw", Host: "shop-rw.ns.svc", Port: 3306,
		Database: "shop", ServerName: "shop.db.example.test"}
	for _, engine := range []examplev1.Engine{examplev1.EnginePostgres, examplev1.EngineMySQL} {
		var out bytes.Buffer
		printCredential(&out, engine, s, "/tmp/ca.crt")
		got, err := exec.Command("sh", "-c", out.String()+`printf '%s%s' "$PGHOST" "$MYSQL_HOST"`).Output()
		if err != nil || string(got) != s.ServerName {
			t.Errorf("%s: the client connects to %q (%v), want %q", engine, got, err, s.ServerName)
		}
	}
}

func TestRecoveryTarget(t *testing.T) {
	for _, tc := range []struct {
		at, lsn, gtid string
		latest        bool
		want          string // describePoint, or the error's start
	}{
		{"", "", "", false, ""},
		{"2026-12-05T14:06:59Z", "", "", false, "2026-12-05T14:06:59Z"},
		{"2026-12-05T16:06:59+02:00", "", "", false, "2026-12-05T14:06:59Z"},
		{"", "0/3000148", "", false, "LSN 0/3000148"},
		{"", "", "0-1-4711", false, "GTID 0-1-4711"},
		{"", "", "", true, "the end of its archive"},
		{"yesterday", "", "", false, "--time:"},
		{"2026-12-05T14:06:59Z", "", "", true, "--time, --lsn, --gtid and --latest are exclusive"},
		{"2026-12-05T14:06:59Z", "", "0-1-4711", false, "--time, --lsn, --gtid and --latest are exclusive"},
	} {
		target, err := recoveryTarget(tc.at, tc.lsn, tc.gtid, tc.latest)
		got := ""
		switch {
		case err != nil:
			got = err.Error()
		case target != nil:
			got = describePoint(target)
		}
		if !strings.HasPrefix(got, tc.want) || tc.want == "" && got != "" {
			t.Errorf("recoveryTarget(%q, %q, %q, %v) = %q, want %q", tc.at, tc.lsn, tc.gtid, tc.latest, got, tc.want)
		}
	}
}

package names

import (
	"regexp"
	"testing"
)

// TestChildNamesNeverCollide builds every database name of up to four
// fragments chosen to provoke collisions, keeps the valid ones, and checks
// that no two databases' children of one kind share a name.
func TestChildNamesNeverCollide(t *testing.T) {
	fragments := []string{"x", "y", "-", "headless", "credentials", "backups", "final", "data", "0", "1", "-1", "r", "w", "o", "instance"}
	dnsLabel := regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	var dbs []string
	var build func(prefix string, depth int)
	build = func(prefix string, depth int) {
		if prefix != "" && dnsLabel.MatchString(prefix) && ReservedSuffix(prefix) == "" {
			dbs = append(dbs, prefix)
		}
		if depth == 4 {
			return
		}
		for _, f := range fragments {
			build(prefix+f, depth+1)
		}
	}
	build("", 0)
	if len(dbs) < 1000 {
		t.Fatalf("only %d names generated; the test would prove little", len(dbs))
	}

	// Children that share a namespace and a kind, by kind.
	kinds := map[string]func(db string) []string{
		"Service": func(db string) []string {
			return []string{ClientService(db), HeadlessService(db), ReadWriteService(db), ReadOnlyService(db), AnyInstanceService(db)}
		},
		"ServiceAccount, Role, RoleBinding": func(db string) []string { return []string{InstanceIdentity(db)} },
		"Secret":                            func(db string) []string { return []string{Secret(db)} },
		"StatefulSet":                       func(db string) []string { return []string{StatefulSet(db)} },
		"PodDisruptionBudget":               func(db string) []string { return []string{PodDisruptionBudget(db)} },
		"PersistentVolumeClaim": func(db string) []string {
			return []string{DataClaim(db, 0), DataClaim(db, 1), DataClaim(db, 10)}
		},
		"MyDatabaseBackup": func(db string) []string { return []string{FinalBackup(db, 1764590000)} },
	}
	for kind, children := range kinds {
		owner := map[string]string{}
		for _, db := range dbs {
			for _, name := range children(db) {
				if other, taken := owner[name]; taken && other != db {
					t.Errorf("%s %q belongs to both database %q and database %q", kind, name, other, db)
				}
				owner[name] = db
			}
		}
	}
}

func TestReservedSuffix(t *testing.T) {
	for name, want := range map[string]string{
		"prod":            "",
		"prod-headless":   "-headless",
		"prod-headless-1": "",
		"prod-rw":         "-rw",
		"prod-ro":         "-ro",
		"prod-r":          "-r",
		"prod-rx":         "",
		"headless":        "",
	} {
		if got := ReservedSuffix(name); got != want {
			t.Errorf("ReservedSuffix(%q) = %q, want %q", name, got, want)
		}
	}
}

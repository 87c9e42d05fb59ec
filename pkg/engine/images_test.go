package engine

import (
	"strings"
	"testing"
)

func TestParseImageOverrides(t *testing.T) {
	got, err := ParseImageOverrides([]string{
		"postgres:15=mydb.local/postgres:15",
		"mariadb:10.11=127.0.0.1:5000/library/mariadb:10.11.8@sha256:" + strings.Repeat("a", 64),
	})
	if err != nil {
		t.Fatal(err)
	}
	pg, _ := Lookup("postgres")
	if img := got.Image(pg, "15"); img != "mydb.local/postgres:15" {
		t.Errorf("postgres 15 runs %q", img)
	}
	if img := got.Image(pg, "17"); img != pg.Images["17"] {
		t.Errorf("postgres 17, not overridden, runs %q, want the pinned %q", img, pg.Images["17"])
	}
	for _, tc := range []struct{ value, want string }{
		{"postgres=mydb.local/postgres:15", "must be ENGINE:VERSION=IMAGE"},
		{"postgres:15", "must be ENGINE:VERSION=IMAGE"},
		{"oracle:23=oracle:23", "engine must be one of"},
		{"postgres:9.6=postgres:9.6", "version must be one of"},
		{"postgres:15=", "is not an image reference"},
		{"postgres:15=Postgres:15", "is not an image reference"},
		{"postgres:15=postgres 15", "is not an image reference"},
	} {
		if _, err := ParseImageOverrides([]string{tc.value}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.value, err, tc.want)
		}
	}
	if _, err := ParseImageOverrides([]string{"postgres:15=a:1", "postgres:15=b:1"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("the same version twice: %v", err)
	}
}

package parameters

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		engine, name, value string
		want                string // a part of the message; "" for accepted
	}{
		{"postgres", "work_mem", "64MB", ""},
		{"postgres", "work_mem", "4096", ""}, // kB
		{"postgres", "work_mem", "63kB", "must be between 64kB and 1TB"},
		{"postgres", "work_mem", "64mb", "must be a size"},
		{"postgres", "work_mem", "lots", "must be a size: an integer, in units of 1kB"},
		{"postgres", "shared_buffers", "128MB", ""},
		{"postgres", "shared_buffers", "16", ""}, // 8kB pages: 128kB
		{"postgres", "shared_buffers", "15", "must be between 128kB"},
		{"postgres", "max_connections", "200", ""},
		{"postgres", "max_connections", "2.5", "must be an integer"},
		{"postgres", "max_connections", "5", "must be between 10 and 10000"},
		{"postgres", "statement_timeout", "30s", ""},
		{"postgres", "statement_timeout", "0", ""},
		{"postgres", "statement_timeout", "30 sec", "must be a time"},
		{"postgres", "log_min_duration_statement", "-1", ""},
		{"postgres", "log_min_duration_statement", "-2", "or -1 to turn it off"},
		{"postgres", "log_min_duration_statement", "250ms", ""},
		{"postgres", "checkpoint_timeout", "10min", ""},
		{"postgres", "checkpoint_timeout", "10", "must be between 30000ms"},
		{"postgres", "checkpoint_completion_target", "0.9", ""},
		{"postgres", "checkpoint_completion_target", "1.5", "must be between 0 and 1"},
		{"postgres", "random_page_cost", "NaN", "must be a number"},
		{"postgres", "log_statement", "ddl", ""},
		{"postgres", "log_statement", "everything", "must be one of none, ddl, mod, all"},
		{"postgres", "jit", "off", ""},
		{"postgres", "jit", "maybe", "must be one of on, off"},
		{"postgres", "archive_command", "cp %p /tmp", "is set by mydb (continuous archiving)"},
		{"postgres", "fsync", "off", "is set by mydb (durability)"},
		{"postgres", "shared_preload_libraries", "evil", "is set by mydb"},
		{"postgres", "no_such_parameter", "1", "is not a parameter mydb lets a postgres database set"},
		{"postgres", "innodb_buffer_pool_size", "1G", "is not a parameter"},
		{"mariadb", "innodb_buffer_pool_size", "256M", ""},
		{"mariadb", "innodb_buffer_pool_size", "1G", ""},
		{"mariadb", "innodb_buffer_pool_size", "1GB", "must be a size: an integer of bytes, or with K, M or G"},
		{"mariadb", "innodb_buffer_pool_size", "1M", "must be between 8MB"},
		{"mysql", "max_connections", "500", ""},
		{"mysql", "slow_query_log", "ON", ""},
		{"mysql", "slow_query_log", "yes", "must be one of ON, OFF"},
		{"mysql", "long_query_time", "0.5", ""},
		{"mysql", "performance_schema", "OFF", ""},
		{"mariadb", "sync_binlog", "0", "is set by mydb (durability)"},
		{"mariadb", "sync-binlog", "0", "is set by mydb (durability)"},
		{"mysql", "read_only", "OFF", "is set by mydb (replication)"},
		{"mysql", "work_mem", "4MB", "is not a parameter mydb lets a mysql database set"},
	} {
		got := Check(tc.engine, tc.name, tc.value)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Check(%s, %s=%q) = %q, want %q", tc.engine, tc.name, tc.value, got, tc.want)
		}
	}
}

func TestSplit(t *testing.T) {
	reload, restart := Split("postgres", map[string]string{"work_mem": "8MB", "max_connections": "200", "unknown": "1"})
	if len(reload) != 1 || reload["work_mem"] != "8MB" || len(restart) != 1 || restart["max_connections"] != "200" {
		t.Errorf("Split = %v, %v", reload, restart)
	}
	if reload, restart := Split("mariadb", nil); reload != nil || restart != nil {
		t.Errorf("Split(nil) = %v, %v", reload, restart)
	}
}

func TestBytes(t *testing.T) {
	for in, want := range map[string]string{"256M": "268435456", "1G": "1073741824", "4096": "4096"} {
		if got := Bytes("mariadb", "innodb_buffer_pool_size", in); got != want {
			t.Errorf("Bytes(%s) = %s, want %s", in, got, want)
		}
	}
	if got := Bytes("mariadb", "max_connections", "500"); got != "500" {
		t.Errorf("Bytes of an integer = %s", got)
	}
}

// Every catalog entry's bounds are in order and the owned names are not
// in the catalog.
func TestCatalogIsConsistent(t *testing.T) {
	for engine, catalog := range map[string]map[string]Parameter{"postgres": postgres, "mariadb": mysqlFamily} {
		for name, p := range catalog {
			if (p.Kind == Integer || p.Kind == Real || p.Kind == Memory || p.Kind == Duration) && p.Min > p.Max {
				t.Errorf("%s %s: min %v > max %v", engine, name, p.Min, p.Max)
			}
			if (p.Kind == Memory || p.Kind == Duration) && p.Unit == 0 {
				t.Errorf("%s %s has no unit", engine, name)
			}
			if _, ok := owned[family(engine)][name]; ok {
				t.Errorf("%s %s is both settable and owned", engine, name)
			}
		}
	}
}

// Package parameters is the catalog of engine parameters a MyDatabase may
// set (spec.parameters): for each engine, which names, what values (type,
// unit, bounds), and whether a change needs the engine restarted. It is an
// allow-list on purpose: a value the engine rejects at a restart keeps it
// from starting at all (PostgreSQL), and parameters mydb sets itself
// (replication, archiving, listening, TLS, durability) must not be
// changed under it, so both are refused at admission with the field path.
//
// A parameter that needs no restart is applied live on every instance
// (PostgreSQL: an include file and a reload; MariaDB and MySQL: SET
// GLOBAL); one that does reaches the engine's command line through the pod
// template, so changing it is a rolling update, primary last.
package parameters

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kind is a parameter's type.
type Kind int

const (
	Integer Kind = iota
	// Memory is a size: PostgreSQL's units (kB, MB, GB, TB; none: the
	// parameter's own unit), or bytes with K, M or G for MariaDB/MySQL.
	Memory
	// Duration is a time: PostgreSQL's units (us, ms, s, min, h, d; none:
	// the parameter's own unit).
	Duration
	Real
	Boolean
	Enum
)

// Parameter is one settable parameter.
type Parameter struct {
	Kind Kind
	// Unit is what a bare number means, in kB (Memory, PostgreSQL), bytes
	// (Memory, MySQL family) or milliseconds (Duration).
	Unit float64
	// Min and Max bound the value, in bytes, milliseconds or the number.
	Min, Max float64
	// Values are an Enum's.
	Values []string
	// Restart tells that the engine reads the parameter only when it starts.
	Restart bool
}

const (
	kB = 1024.0
	ms = 1.0
)

var postgres = map[string]Parameter{
	"max_connections":                     {Kind: Integer, Min: 10, Max: 10000, Restart: true},
	"shared_buffers":                      {Kind: Memory, Unit: 8 * kB, Min: 128 * kB, Max: 1 << 40, Restart: true},
	"max_worker_processes":                {Kind: Integer, Min: 0, Max: 1024, Restart: true},
	"max_locks_per_transaction":           {Kind: Integer, Min: 10, Max: 100000, Restart: true},
	"autovacuum_max_workers":              {Kind: Integer, Min: 1, Max: 100, Restart: true},
	"work_mem":                            {Kind: Memory, Unit: kB, Min: 64 * kB, Max: 1 << 40},
	"maintenance_work_mem":                {Kind: Memory, Unit: kB, Min: 1 << 20, Max: 1 << 40},
	"effective_cache_size":                {Kind: Memory, Unit: 8 * kB, Min: 8 * kB, Max: 1 << 44},
	"max_wal_size":                        {Kind: Memory, Unit: 1 << 20, Min: 32 << 20, Max: 1 << 44},
	"min_wal_size":                        {Kind: Memory, Unit: 1 << 20, Min: 32 << 20, Max: 1 << 44},
	"temp_file_limit":                     {Kind: Memory, Unit: kB, Min: -1, Max: 1 << 50},
	"checkpoint_timeout":                  {Kind: Duration, Unit: 1000 * ms, Min: 30 * 1000, Max: 86400 * 1000},
	"checkpoint_completion_target":        {Kind: Real, Min: 0, Max: 1},
	"random_page_cost":                    {Kind: Real, Min: 0, Max: 1e6},
	"seq_page_cost":                       {Kind: Real, Min: 0, Max: 1e6},
	"effective_io_concurrency":            {Kind: Integer, Min: 0, Max: 1000},
	"default_statistics_target":           {Kind: Integer, Min: 1, Max: 10000},
	"max_parallel_workers":                {Kind: Integer, Min: 0, Max: 1024},
	"max_parallel_workers_per_gather":     {Kind: Integer, Min: 0, Max: 1024},
	"statement_timeout":                   {Kind: Duration, Unit: ms, Min: 0, Max: math.MaxInt32},
	"lock_timeout":                        {Kind: Duration, Unit: ms, Min: 0, Max: math.MaxInt32},
	"idle_in_transaction_session_timeout": {Kind: Duration, Unit: ms, Min: 0, Max: math.MaxInt32},
	"log_min_duration_statement":          {Kind: Duration, Unit: ms, Min: -1, Max: math.MaxInt32},
	"log_autovacuum_min_duration":         {Kind: Duration, Unit: ms, Min: -1, Max: math.MaxInt32},
	"log_statement":                       {Kind: Enum, Values: []string{"none", "ddl", "mod", "all"}},
	"log_lock_waits":                      {Kind: Boolean},
	"log_temp_files":                      {Kind: Memory, Unit: kB, Min: -1, Max: math.MaxInt32 * kB},
	"log_checkpoints":                     {Kind: Boolean},
	"track_io_timing":                     {Kind: Boolean},
	"jit":                                 {Kind: Boolean},
	"autovacuum_naptime":                  {Kind: Duration, Unit: 1000 * ms, Min: 1000, Max: 2147483 * 1000},
	"autovacuum_vacuum_scale_factor":      {Kind: Real, Min: 0, Max: 100},
	"autovacuum_analyze_scale_factor":     {Kind: Real, Min: 0, Max: 100},
	"autovacuum_vacuum_cost_limit":        {Kind: Integer, Min: -1, Max: 10000},
}

var mysqlFamily = map[string]Parameter{
	"performance_schema":       {Kind: Boolean, Restart: true},
	"max_connections":          {Kind: Integer, Min: 10, Max: 100000},
	"innodb_buffer_pool_size":  {Kind: Memory, Unit: 1, Min: 8 << 20, Max: 1 << 44},
	"innodb_io_capacity":       {Kind: Integer, Min: 100, Max: 1 << 32},
	"innodb_lock_wait_timeout": {Kind: Integer, Min: 1, Max: 1073741824},
	"lock_wait_timeout":        {Kind: Integer, Min: 1, Max: 31536000},
	"long_query_time":          {Kind: Real, Min: 0, Max: 31536000},
	"slow_query_log":           {Kind: Boolean},
	"wait_timeout":             {Kind: Integer, Min: 1, Max: 31536000},
	"interactive_timeout":      {Kind: Integer, Min: 1, Max: 31536000},
	"max_allowed_packet":       {Kind: Memory, Unit: 1, Min: 1024, Max: 1 << 30},
	"tmp_table_size":           {Kind: Memory, Unit: 1, Min: 1024, Max: 1 << 40},
	"max_heap_table_size":      {Kind: Memory, Unit: 1, Min: 16 << 10, Max: 1 << 40},
	"sort_buffer_size":         {Kind: Memory, Unit: 1, Min: 32 << 10, Max: 1 << 32},
	"join_buffer_size":         {Kind: Memory, Unit: 1, Min: 128, Max: 1 << 32},
	"table_open_cache":         {Kind: Integer, Min: 1, Max: 1048576},
	"thread_cache_size":        {Kind: Integer, Min: 0, Max: 16384},
	"max_connect_errors":       {Kind: Integer, Min: 1, Max: 1 << 32},
}

// owned are parameters mydb sets itself, with what for.
var owned = map[string]map[string]string{
	"postgres": ownedBy(map[string][]string{
		"listening and sockets":    {"listen_addresses", "port", "unix_socket_directories", "cluster_name"},
		"TLS":                      {"ssl", "ssl_cert_file", "ssl_key_file", "ssl_ca_file", "ssl_min_protocol_version"},
		"replication":              {"wal_level", "hot_standby", "max_wal_senders", "max_replication_slots", "primary_conninfo", "primary_slot_name", "synchronous_standby_names", "synchronous_commit", "wal_log_hints"},
		"continuous archiving":     {"archive_mode", "archive_command", "archive_library", "archive_timeout", "restore_command", "recovery_target", "recovery_target_time", "recovery_target_lsn", "recovery_target_inclusive", "recovery_target_action"},
		"durability":               {"fsync", "full_page_writes", "wal_sync_method"},
		"files and authentication": {"data_directory", "config_file", "hba_file", "ident_file", "password_encryption", "shared_preload_libraries", "logging_collector", "log_destination", "log_directory"},
	}),
	"mysql-family": ownedBy(map[string][]string{
		"listening":   {"bind_address", "port", "socket", "report_host", "server_id", "skip_networking"},
		"TLS":         {"ssl_cert", "ssl_key", "ssl_ca", "tls_version", "require_secure_transport"},
		"replication": {"log_bin", "binlog_format", "gtid_strict_mode", "gtid_mode", "enforce_gtid_consistency", "log_slave_updates", "log_replica_updates", "read_only", "super_read_only", "rpl_semi_sync_master_enabled", "rpl_semi_sync_slave_enabled", "rpl_semi_sync_source_enabled", "rpl_semi_sync_replica_enabled", "log_basename", "binlog_expire_logs_seconds"},
		"durability":  {"sync_binlog", "innodb_flush_log_at_trx_commit", "innodb_doublewrite"},
		"files":       {"datadir", "tmpdir", "plugin_load", "plugin_load_add", "init_file", "secure_file_priv"},
	}),
}

func ownedBy(groups map[string][]string) map[string]string {
	out := map[string]string{}
	for why, names := range groups {
		for _, name := range names {
			out[name] = why
		}
	}
	return out
}

// family is the catalog an engine uses.
func family(engine string) string {
	if engine == "postgres" {
		return "postgres"
	}
	return "mysql-family"
}

// Lookup is engine's parameter name.
func Lookup(engine, name string) (Parameter, bool) {
	if family(engine) == "postgres" {
		p, ok := postgres[name]
		return p, ok
	}
	p, ok := mysqlFamily[name]
	return p, ok
}

// Names are the parameters engine lets a MyDatabase set, sorted.
func Names(engine string) []string {
	catalog := mysqlFamily
	if family(engine) == "postgres" {
		catalog = postgres
	}
	out := make([]string, 0, len(catalog))
	for name := range catalog {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Check says what is wrong with setting name to value on engine ("" when
// nothing is).
func Check(engine, name, value string) string {
	if why, ok := owned[family(engine)][strings.ReplaceAll(name, "-", "_")]; ok {
		return fmt.Sprintf("is set by mydb (%s) and may not be changed", why)
	}
	p, ok := Lookup(engine, name)
	if !ok {
		return fmt.Sprintf("is not a parameter mydb lets a %s database set (docs/operations.md lists them)", engine)
	}
	if err := p.check(engine, value); err != nil {
		return err.Error()
	}
	return ""
}

var (
	integer      = regexp.MustCompile(`^-?[0-9]+$`)
	pgMemory     = regexp.MustCompile(`^(-?[0-9]+)\s*(B|kB|MB|GB|TB)?$`)
	pgDuration   = regexp.MustCompile(`^(-?[0-9]+)\s*(us|ms|s|min|h|d)?$`)
	mysqlMemory  = regexp.MustCompile(`^([0-9]+)([KMG])?$`)
	pgMemoryUnit = map[string]float64{"B": 1, "kB": kB, "MB": kB * kB, "GB": kB * kB * kB, "TB": kB * kB * kB * kB}
	pgTimeUnit   = map[string]float64{"us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}
	mysqlUnit    = map[string]float64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
	pgBooleans   = []string{"on", "off", "true", "false", "yes", "no", "1", "0"}
	myBooleans   = []string{"ON", "OFF", "1", "0", "on", "off"}
)

func (p Parameter) check(engine, value string) error {
	pg := family(engine) == "postgres"
	switch p.Kind {
	case Boolean:
		if allowed := map[bool][]string{true: pgBooleans, false: myBooleans}[pg]; !slices.Contains(allowed, value) {
			return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
		}
		return nil
	case Enum:
		if !slices.Contains(p.Values, value) {
			return fmt.Errorf("must be one of %s", strings.Join(p.Values, ", "))
		}
		return nil
	}
	// A minimum of -1: -1 turns the parameter off; anything else is at
	// least 0.
	if p.Min == -1 && value == "-1" {
		return nil
	}
	low := max(p.Min, 0)
	if p.Kind == Real {
		low = p.Min
	}
	var n float64
	switch p.Kind {
	case Integer:
		if !integer.MatchString(value) {
			return fmt.Errorf("must be an integer")
		}
		n, _ = strconv.ParseFloat(value, 64)
	case Real:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("must be a number")
		}
		n = f
	case Memory:
		var ok bool
		if n, ok = p.bytes(pg, value); !ok {
			if pg {
				return fmt.Errorf("must be a size: an integer, in units of %s, or with kB, MB, GB or TB", formatBytes(p.Unit))
			}
			return fmt.Errorf("must be a size: an integer of bytes, or with K, M or G")
		}
	case Duration:
		m := pgDuration.FindStringSubmatch(value)
		if m == nil {
			return fmt.Errorf("must be a time: an integer, in %s, or with us, ms, s, min, h or d", durationUnitName(p.Unit))
		}
		n, _ = strconv.ParseFloat(m[1], 64)
		if m[2] != "" {
			n *= pgTimeUnit[m[2]]
		} else {
			n *= p.Unit
		}
	}
	if n < low || n > p.Max {
		msg := fmt.Sprintf("must be between %s and %s", formatBound(p, low), formatBound(p, p.Max))
		if p.Min == -1 {
			msg += ", or -1 to turn it off"
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// bytes is a Memory value in bytes.
func (p Parameter) bytes(pg bool, value string) (float64, bool) {
	if pg {
		m := pgMemory.FindStringSubmatch(value)
		if m == nil {
			return 0, false
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		if m[2] == "" {
			return n * p.Unit, true
		}
		return n * pgMemoryUnit[m[2]], true
	}
	m := mysqlMemory.FindStringSubmatch(value)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	if m[2] != "" {
		n *= mysqlUnit[m[2]]
	}
	return n, true
}

// Bytes is a MySQL-family Memory value as SET GLOBAL takes it (a plain
// number: SET does not read K, M or G); other values as they are.
func Bytes(engine, name, value string) string {
	p, ok := Lookup(engine, name)
	if !ok || p.Kind != Memory || family(engine) == "postgres" {
		return value
	}
	n, ok := p.bytes(false, value)
	if !ok {
		return value
	}
	return strconv.FormatFloat(n, 'f', 0, 64)
}

func formatBound(p Parameter, v float64) string {
	switch {
	case p.Kind == Memory:
		return formatBytes(v)
	case p.Kind == Duration:
		return strconv.FormatFloat(v, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func formatBytes(v float64) string {
	for _, u := range []struct {
		name string
		size float64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}} {
		if v >= u.size && math.Mod(v, u.size) == 0 {
			return strconv.FormatFloat(v/u.size, 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + "B"
}

func durationUnitName(unit float64) string {
	if unit == 1000 {
		return "seconds"
	}
	return "milliseconds"
}

// Split divides a database's parameters into those its engine reads live
// (reload) and those it reads only at start (restart). Names the catalog
// does not know are left out (admission refuses them).
func Split(engine string, params map[string]string) (reload, restart map[string]string) {
	for name, value := range params {
		p, ok := Lookup(engine, name)
		switch {
		case !ok:
		case p.Restart:
			if restart == nil {
				restart = map[string]string{}
			}
			restart[name] = value
		default:
			if reload == nil {
				reload = map[string]string{}
			}
			reload[name] = value
		}
	}
	return reload, restart
}

// Sorted are params as name=value, sorted by name.
func Sorted(params map[string]string) []string {
	out := make([]string, 0, len(params))
	for name, value := range params {
		out = append(out, name+"="+value)
	}
	sort.Strings(out)
	return out
}

// Encode is params as sorted name=value lines: a comparable form (the
// instance manager's topology carries it).
func Encode(params map[string]string) string {
	return strings.Join(Sorted(params), "\n")
}

// Decode reverses Encode.
func Decode(encoded string) map[string]string {
	if encoded == "" {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(encoded, "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			out[name] = value
		}
	}
	return out
}

// Hash names an encoded set of parameters briefly ("" for none): instance
// managers report the hash of what they applied.
func Hash(encoded string) string {
	if encoded == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(encoded))
	return hex.EncodeToString(sum[:8])
}

// standbyFloors are the PostgreSQL parameters a hot standby needs at least
// the primary's value of (or it does not start replaying), with their
// defaults: a rolling update replaces the replicas first, so lowering one
// would leave every replaced replica unable to follow.
var standbyFloors = map[string]int64{"max_connections": 100, "max_worker_processes": 8, "max_locks_per_transaction": 64}

// Lowered are the parameters of engine whose value goes down from old to
// new (a parameter left out has its default) and which a replica needs at
// least the primary's value of, sorted.
func Lowered(engine string, old, new map[string]string) []string {
	if family(engine) != "postgres" {
		return nil
	}
	value := func(params map[string]string, name string, def int64) int64 {
		if v, err := strconv.ParseInt(params[name], 10, 64); err == nil {
			return v
		}
		return def
	}
	var out []string
	for name, def := range standbyFloors {
		if value(new, name, def) < value(old, name, def) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

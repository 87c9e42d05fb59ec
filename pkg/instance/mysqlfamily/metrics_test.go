package mysqlfamily

import (
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance"
)

func byName(samples []instance.Sample) map[string]instance.Sample {
	out := map[string]instance.Sample{}
	for _, s := range samples {
		key := s.Name
		if len(s.Labels) >= 2 {
			key += "{" + s.Labels[0] + "=" + s.Labels[1] + "}"
		}
		out[key] = s
	}
	return out
}

func TestGlobalStatusSamplesAsMysqldExporter(t *testing.T) {
	got := byName(GlobalStatusSamples([]map[string]string{
		{"Variable_name": "Com_commit", "Value": "12"},
		{"Variable_name": "Handler_commit", "Value": "40"},
		{"Variable_name": "Threads_connected", "Value": "3"},
		{"Variable_name": "Ssl_cipher", "Value": "TLS_AES_256_GCM_SHA384"},
		{"Variable_name": "Rpl_status", "Value": "AUTH_MASTER"},
		{"Variable_name": "Odd-name", "Value": "1"},
	}))
	for key, want := range map[string]struct {
		value float64
		typ   instance.MetricType
	}{
		"mysql_global_status_commands_total{command=commit}": {12, instance.Counter},
		"mysql_global_status_handlers_total{handler=commit}": {40, instance.Counter},
		"mysql_global_status_threads_connected":              {3, instance.Untyped},
	} {
		s, ok := got[key]
		if !ok || s.Value != want.value || s.Type != want.typ {
			t.Errorf("%s: %+v (present %v), want %v of type %v", key, s, ok, want.value, want.typ)
		}
	}
	if len(got) != 3 {
		t.Errorf("got %d samples, want 3 (text values and invalid names dropped): %v", len(got), got)
	}
}

func TestReplicaStatusSamples(t *testing.T) {
	if s := ReplicaStatusSamples(ReplicaStatus{}); s != nil {
		t.Errorf("a server replicating from no one: %v", s)
	}
	behind := 2.0
	got := byName(ReplicaStatusSamples(ReplicaStatus{Configured: true, Host: "10.0.0.1", IORunning: "Connecting", SQLRunning: "Yes", SecondsBehind: &behind}))
	for key, want := range map[string]float64{
		"mysql_slave_status_slave_io_running{channel_name=}":      0,
		"mysql_slave_status_slave_sql_running{channel_name=}":     1,
		"mysql_slave_status_seconds_behind_master{channel_name=}": 2,
	} {
		if s, ok := got[key]; !ok || s.Value != want {
			t.Errorf("%s = %v (present %v), want %v", key, s.Value, ok, want)
		}
	}
	for _, s := range got {
		if s.Labels[5] != "10.0.0.1" {
			t.Errorf("%s: master_host %q", s.Name, s.Labels[5])
		}
	}
	if _, ok := byName(ReplicaStatusSamples(ReplicaStatus{Configured: true}))["mysql_slave_status_seconds_behind_master{channel_name=}"]; ok {
		t.Error("a stopped SQL thread reports seconds behind")
	}
}

func TestBinlogSamples(t *testing.T) {
	got := byName(BinlogSamples([]map[string]string{
		{"Log_name": "mydb-bin.000001", "File_size": "1000"},
		{"Log_name": "mydb-bin.000007", "File_size": "24"},
	}))
	for name, want := range map[string]float64{"mysql_binlog_size_bytes": 1024, "mysql_binlog_files": 2, "mysql_binlog_file_number": 7} {
		if s, ok := got[name]; !ok || s.Value != want {
			t.Errorf("%s = %v (present %v), want %v", name, s.Value, ok, want)
		}
	}
}

//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditSize is how long an audit log is now; 0 when it does not exist yet.
func auditSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// readAudit is the events an audit log gained from offset on.
func readAudit(t *testing.T, path string, offset int64) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (hack/local-up.sh enables the audit logs)", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var evs []auditv1.Event
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if e.Stage == auditv1.StageResponseComplete || e.Stage == auditv1.StagePanic {
			evs = append(evs, e)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(evs, func(i, j int) bool {
		return evs[i].RequestReceivedTimestamp.Before(&evs[j].RequestReceivedTimestamp)
	})
	return evs
}

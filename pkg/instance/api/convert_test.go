package api

import (
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
)

func TestPositionConversions(t *testing.T) {
	for _, p := range []Position{{Timeline: 3, LSN: "16/B374D848"}, {GTID: "0-1-42,1-2-7"}, {}} {
		v1 := PositionToV1(&p)
		if v1 == nil || PositionFromV1(*v1) != p {
			t.Errorf("%+v to v1 and back: %+v", p, v1)
		}
		internal := example.InstancePosition{Timeline: v1.Timeline, LSN: v1.LSN, GTID: v1.GTID}
		if PositionFromInternal(internal) != p {
			t.Errorf("%+v from the internal version: %+v", p, PositionFromInternal(internal))
		}
	}
	if PositionToV1(nil) != nil {
		t.Error("no position became one")
	}
	long := strings.Repeat("u", example.MaxPositionLength-len(":1-9")) + ":1-9"
	if got := PositionToV1(&Position{GTID: long}); got == nil || got.GTID != long {
		t.Errorf("a position of the longest length: %v", got)
	}
	for _, p := range []Position{{GTID: long + ",x:1"}, {Timeline: 1, LSN: strings.Repeat("0", example.MaxPositionLength+1)}} {
		if got := PositionToV1(&p); got != nil {
			t.Errorf("a position longer than validation takes was kept: %d bytes", len(got.LSN)+len(got.GTID))
		}
	}
}

package api

import (
	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

// The MyDatabase API records positions as InstancePosition (in
// status.instances and a backup's status); these convert between the two,
// so positions compare the same everywhere (Position.Compare).

// PositionFromV1 is the position a v1 status records.
func PositionFromV1(p examplev1.InstancePosition) Position {
	return Position{Timeline: uint32(p.Timeline), LSN: p.LSN, GTID: p.GTID}
}

// PositionFromInternal is the position a status records, in the API
// server's internal version.
func PositionFromInternal(p example.InstancePosition) Position {
	return Position{Timeline: uint32(p.Timeline), LSN: p.LSN, GTID: p.GTID}
}

// PositionToV1 is p as a status records it: nil when p is nil or does not
// fit (a string longer than example.MaxPositionLength, which validation
// refuses), so that a position never fails a status write.
func PositionToV1(p *Position) *examplev1.InstancePosition {
	if p == nil || len(p.LSN) > example.MaxPositionLength || len(p.GTID) > example.MaxPositionLength {
		return nil
	}
	return &examplev1.InstancePosition{Timeline: int32(p.Timeline), LSN: p.LSN, GTID: p.GTID}
}

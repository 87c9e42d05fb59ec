package failover

import (
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// mostAdvancedReplica is the replica a failover promotes: of those whose
// manager answers, run their engine and follow primary, the one with the
// most advanced position; ties go to the lowest ordinal.
func mostAdvancedReplica(primary string, instances []examplev1.InstanceStatus, reports []*api.Status) (string, *api.Position) {
	var best string
	var bestPos *api.Position
	for i, in := range instances {
		r := reportOf(i, reports)
		if in.Name == primary || r == nil || r.Role != api.RoleReplica || r.Primary != primary || !r.EngineRunning || r.Position == nil {
			continue
		}
		if bestPos == nil || r.Position.Compare(*bestPos) > 0 {
			best, bestPos = in.Name, r.Position
		}
	}
	return best, bestPos
}

// aheadOfCandidate finds, among the instances other than the primary and
// the candidate, one whose last reported position may hold commits the
// candidate at pos lacks: the most advanced such, with why it cannot take
// over and its position ("" when there is none). Positions of an older
// Postgres timeline than the candidate's are history the candidate's
// timeline already settled; a newer timeline, or a GTID domain further
// along, is ahead.
func aheadOfCandidate(primary, candidate string, pos api.Position, instances []examplev1.InstanceStatus, reports []*api.Status) (string, string, *api.Position) {
	var holder, why string
	var at *api.Position
	for i, in := range instances {
		if in.Name == primary || in.Name == candidate || in.Position == nil {
			continue
		}
		p := api.PositionFromV1(*in.Position)
		if !mayHoldMore(p, pos) || (at != nil && p.Compare(*at) <= 0) {
			continue
		}
		holder, at = in.Name, &p
		switch r := reportOf(i, reports); {
		case r == nil:
			why = "its manager does not answer"
		case !r.EngineRunning:
			why = "its engine does not run"
		default:
			why = fmt.Sprintf("it acts as %s following %q", r.Role, r.Primary)
		}
	}
	return holder, why, at
}

// mayHoldMore tells whether a replica at p may hold commits one at
// candidate lacks.
func mayHoldMore(p, candidate api.Position) bool {
	switch {
	case p.LSN != "":
		if p.Timeline != candidate.Timeline {
			return p.Timeline > candidate.Timeline
		}
		return !candidate.Reached(p)
	case p.GTID != "":
		return !candidate.Reached(p)
	}
	return false
}

// PositionString is a position as messages print it: timeline/LSN for
// PostgreSQL, the GTID set for the MySQL family.
func PositionString(p *api.Position) string {
	switch {
	case p == nil:
		return "unknown"
	case p.LSN != "":
		return fmt.Sprintf("%d/%s", p.Timeline, p.LSN)
	case p.GTID != "":
		return p.GTID
	}
	return "empty"
}

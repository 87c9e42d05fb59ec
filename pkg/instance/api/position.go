package api

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is a point in the data's history.
type Position struct {
	// Timeline and LSN are Postgres': the current WAL LSN on a primary; on
	// a replica the WAL it received and flushed (or replayed, when that is
	// further), which a promotion replays in full.
	Timeline uint32 `json:"timeline,omitempty"`
	LSN      string `json:"lsn,omitempty"`
	// GTID is MySQL-family: gtid_current_pos on a primary (MariaDB),
	// gtid_executed (MySQL); on a replica what it applied merged with what
	// its relay log holds (MergeGTIDs of gtid_slave_pos and Gtid_IO_Pos;
	// gtid_executed and Retrieved_Gtid_Set), which a promotion applies.
	GTID string `json:"gtid,omitempty"`
}

// Reached tells whether a replica at p holds everything up to final (a
// fenced primary's FencedPosition): the same timeline and an LSN at least
// final's (Postgres), or, for every GTID domain of final, a sequence number
// at least final's (MySQL family). An empty or unparsable final is never
// reached.
func (p Position) Reached(final Position) bool {
	switch {
	case final.LSN != "":
		want, err1 := ParseLSN(final.LSN)
		got, err2 := ParseLSN(p.LSN)
		return err1 == nil && err2 == nil && p.Timeline == final.Timeline && got >= want
	case final.GTID != "":
		want, err1 := parseGTIDs(final.GTID)
		got, err2 := parseGTIDs(p.GTID)
		if err1 != nil || err2 != nil {
			return false
		}
		for domain, seq := range want {
			if got[domain] < seq {
				return false
			}
		}
		return true
	}
	return false
}

// Compare orders two positions of replicas of the same primary: -1 when p
// is behind q, 1 when ahead, 0 when equal or not comparable.
func (p Position) Compare(q Position) int {
	switch {
	case p.Reached(q) && q.Reached(p):
		return 0
	case p.Reached(q):
		return 1
	case q.Reached(p):
		return -1
	}
	return 0
}

// ParseLSN reads a Postgres LSN, "16/B374D848".
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q: no /", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// FormatLSN writes an LSN as Postgres does.
func FormatLSN(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, uint32(lsn)) }

// parseGTIDs reads a MariaDB GTID list, "0-1-42,1-2-7", into the highest
// sequence number of each domain ("" is the empty list). (A MySQL GTID set,
// uuid:1-42, gives the end of each uuid's last interval.)
func parseGTIDs(s string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if uuid, intervals, ok := strings.Cut(part, ":"); ok {
			last := intervals[strings.LastIndexAny(intervals, ":-")+1:]
			n, err := strconv.ParseUint(last, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("GTID set %q: %w", s, err)
			}
			out[uuid] = max(out[uuid], n)
			continue
		}
		fields := strings.Split(part, "-")
		if len(fields) != 3 {
			return nil, fmt.Errorf("GTID %q: want domain-server-sequence", part)
		}
		n, err := strconv.ParseUint(fields[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("GTID %q: %w", part, err)
		}
		out[fields[0]] = max(out[fields[0]], n)
	}
	return out, nil
}

// MergeGTIDs is the union of GTID positions: for each MariaDB domain (or
// MySQL source uuid) the entry with the highest sequence number among
// lists, in the order the domains first appear. Empty lists are skipped;
// when a list does not parse, the first non-empty one is returned as is.
func MergeGTIDs(lists ...string) string {
	type entry struct {
		text string
		seq  uint64
	}
	var order []string
	best := map[string]entry{}
	var first string
	for _, list := range lists {
		if strings.TrimSpace(list) == "" {
			continue
		}
		if first == "" {
			first = list
		}
		for _, part := range strings.Split(list, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			seqs, err := parseGTIDs(part)
			if err != nil || len(seqs) != 1 {
				return first
			}
			for key, seq := range seqs {
				e, ok := best[key]
				if !ok {
					order = append(order, key)
				}
				if !ok || seq > e.seq {
					best[key] = entry{text: part, seq: seq}
				}
			}
		}
	}
	out := make([]string, 0, len(order))
	for _, key := range order {
		out = append(out, best[key].text)
	}
	return strings.Join(out, ",")
}

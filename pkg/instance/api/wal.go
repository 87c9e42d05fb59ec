package api

import (
	"fmt"
	"strconv"
	"strings"
)

// WALSegmentSize is the size of a PostgreSQL WAL segment as mydb
// bootstraps them (initdb's default).
const WALSegmentSize = 16 << 20

// WALSegment parses a WAL segment file's name (24 hexadecimal digits:
// timeline, then the segment number in two halves); ok is false for any
// other name (a history file, a .partial or .backup file).
func WALSegment(name string) (timeline uint32, segment uint64, ok bool) {
	if len(name) != 24 || strings.Trim(name, "0123456789ABCDEF") != "" {
		return 0, 0, false
	}
	tli, err1 := strconv.ParseUint(name[:8], 16, 32)
	hi, err2 := strconv.ParseUint(name[8:16], 16, 32)
	lo, err3 := strconv.ParseUint(name[16:], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil || lo >= 1<<32/WALSegmentSize {
		return 0, 0, false
	}
	return uint32(tli), hi*(1<<32/WALSegmentSize) + lo, true
}

// LSNSegment is the number of the WAL segment that holds lsn.
func LSNSegment(lsn string) (uint64, error) {
	pos, err := ParseLSN(lsn)
	return pos / WALSegmentSize, err
}

// WALSegmentName is the file name of segment on timeline: WALSegment's
// inverse.
func WALSegmentName(timeline uint32, segment uint64) string {
	const perLog = 1 << 32 / WALSegmentSize
	return fmt.Sprintf("%08X%08X%08X", timeline, segment/perLog, segment%perLog)
}

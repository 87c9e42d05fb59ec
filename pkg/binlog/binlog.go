// Package binlog reads what a point-in-time restore needs to know of a
// MariaDB or MySQL binary log file without replaying it: the GTID position
// before its first transaction, the GTIDs it holds, and the times of its
// events. It reads the event headers (binlog format v4) and the bodies of
// the GTID events only; everything else is skipped by its length. The two
// servers number their own events apart (MariaDB's from 160), so one
// reader serves both.
package binlog

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// magic begins every binary log file.
var magic = []byte{0xfe, 'b', 'i', 'n'}

// The event types read here (MariaDB's and MySQL's log_event.h).
const (
	typeRotate   = 4
	typeGTID     = 162 // GTID_EVENT: a transaction's GTID, before its events
	typeGTIDList = 163 // GTID_LIST_EVENT: the position before this file

	typeMySQLGTID          = 33 // GTID_LOG_EVENT
	typeMySQLAnonymousGTID = 34 // ANONYMOUS_GTID_LOG_EVENT: gtid_mode is not ON
	typeMySQLPreviousGTIDs = 35 // PREVIOUS_GTIDS_LOG_EVENT: gtid_executed before this file
	typeMySQLTaggedGTID    = 42 // GTID_TAGGED_LOG_EVENT (8.3)
)

// headerSize is the v4 event header: timestamp, type, server id, event
// size, next position, flags.
const headerSize = 19

// GTID is a global transaction id: MariaDB's domain-server-sequence, or
// MySQL's source_id:sequence (UUID set, Domain and Server zero). A
// sequence counts within its stream: a MariaDB domain, a MySQL source.
type GTID struct {
	Domain, Server uint32
	Seq            uint64
	UUID           string `json:",omitempty"`
}

func (g GTID) String() string {
	if g.UUID != "" {
		return fmt.Sprintf("%s:%d", g.UUID, g.Seq)
	}
	return fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq)
}

// sameStream tells whether a and b count in one sequence.
func sameStream(a, b GTID) bool { return a.Domain == b.Domain && a.UUID == b.UUID }

// Position is a GTID position: the last GTID of each stream. MariaDB
// writes it as gtid_binlog_pos ("0-1-100,1-2-7"); MySQL as a GTID set
// whose every source runs from 1 without a gap ("3e11fa47-...:1-100"),
// which is what its gtid_executed is unless transactions were skipped by
// hand: a set with a gap is refused, not rounded.
type Position []GTID

// ParsePosition reads a position as MariaDB or MySQL writes it (MySQL's
// may break lines after its commas); "" is the empty position.
func ParsePosition(s string) (Position, error) {
	var p Position
	for part := range strings.SplitSeq(strings.Join(strings.Fields(s), ""), ",") {
		if part == "" {
			continue
		}
		if strings.Contains(part, ":") {
			g, err := parseMySQLSource(part)
			if err != nil {
				return nil, err
			}
			p = p.With(g)
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("%q is not a GTID (domain-server-sequence)", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%q is not a GTID: %w", part, err)
		}
		p = p.With(GTID{Domain: uint32(d), Server: uint32(sv), Seq: seq})
	}
	return p, nil
}

// ParseGTID reads one GTID as its server writes it: MariaDB's
// domain-server-sequence, or MySQL's source_uuid:sequence.
func ParseGTID(s string) (GTID, error) {
	s = strings.TrimSpace(s)
	if uuid, seq, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || n == 0 || len(uuid) != 36 || strings.Count(uuid, "-") != 4 {
			return GTID{}, fmt.Errorf("%q is not a MySQL GTID (source_uuid:sequence)", s)
		}
		if _, err := hex.DecodeString(strings.ReplaceAll(uuid, "-", "")); err != nil {
			return GTID{}, fmt.Errorf("%q is not a MySQL GTID (source_uuid:sequence): %v", s, err)
		}
		return GTID{UUID: strings.ToLower(uuid), Seq: n}, nil
	}
	p, err := ParsePosition(s)
	if err != nil || len(p) != 1 || strings.Contains(s, ",") {
		return GTID{}, fmt.Errorf("%q is not a MariaDB GTID (domain-server-sequence)", s)
	}
	return p[0], nil
}

// parseMySQLSource reads one source of a MySQL GTID set, uuid:1-N (or
// uuid:1), which must run from 1 without a gap.
func parseMySQLSource(part string) (GTID, error) {
	uuid, intervals, _ := strings.Cut(part, ":")
	if len(uuid) != 36 || strings.Count(uuid, "-") != 4 {
		return GTID{}, fmt.Errorf("%q is not a GTID set's member (uuid:1-N)", part)
	}
	if strings.Contains(intervals, ":") {
		return GTID{}, fmt.Errorf("%q is not a GTID set mydb can replay to: its source's transactions have a gap", part)
	}
	first, last, found := strings.Cut(intervals, "-")
	if !found {
		last = first
	}
	lo, err1 := strconv.ParseUint(first, 10, 64)
	hi, err2 := strconv.ParseUint(last, 10, 64)
	if err := errors.Join(err1, err2); err != nil || hi < lo {
		return GTID{}, fmt.Errorf("%q is not a GTID set's member (uuid:1-N): %v", part, err)
	}
	if lo != 1 {
		return GTID{}, fmt.Errorf("%q is not a GTID set mydb can replay to: its source's transactions do not start at 1", part)
	}
	return GTID{UUID: strings.ToLower(uuid), Seq: hi}, nil
}

// With is p with g as its stream's last GTID (when later than p's).
func (p Position) With(g GTID) Position {
	out := slices.Clone(p)
	for i, have := range out {
		if sameStream(have, g) {
			if g.Seq > have.Seq {
				out[i] = g
			}
			return out
		}
	}
	out = append(out, g)
	slices.SortFunc(out, func(a, b GTID) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), strings.Compare(a.UUID, b.UUID))
	})
	return out
}

// SeqOf is the sequence number of p's last GTID in g's stream, 0 without
// one.
func (p Position) SeqOf(g GTID) uint64 {
	for _, have := range p {
		if sameStream(have, g) {
			return have.Seq
		}
	}
	return 0
}

// Covers tells whether every GTID of q is at or before p's in its stream:
// a server at p has applied everything q names.
func (p Position) Covers(q Position) bool {
	for _, g := range q {
		if g.Seq > p.SeqOf(g) {
			return false
		}
	}
	return true
}

// Begin is the position the file begins at: its Gtid_list (MySQL's
// Previous_gtids), or right before its first transaction of a stream the
// list has no GTID of (or an older one: a MariaDB clone's first file).
func (s Summary) Begin() Position {
	p := s.Start
	for _, g := range s.First {
		if g.Seq-1 > p.SeqOf(g) {
			g.Seq--
			p = p.With(g)
		}
	}
	return p
}

// String writes p as its server does: MariaDB's GTIDs, or MySQL's set
// (uuid:1-N, which mysqlbinlog's --exclude-gtids reads).
func (p Position) String() string {
	parts := make([]string, len(p))
	for i, g := range p {
		parts[i] = g.String()
		if g.UUID != "" {
			parts[i] = fmt.Sprintf("%s:1-%d", g.UUID, g.Seq)
		}
	}
	return strings.Join(parts, ",")
}

// Summary is what a binary log file holds, as a restore chooses files.
type Summary struct {
	// Start is the position before the file's first transaction (its
	// Gtid_list event); End the position after its last one.
	Start Position `json:"start,omitempty"`
	End   Position `json:"end,omitempty"`
	// First is the first GTID of each domain in the file. A clone's first
	// file starts with an empty Gtid_list though its first transaction is
	// far from the first: the file begins right before First.
	First Position `json:"first,omitempty"`
	// Transactions counts the GTID events.
	Transactions int `json:"transactions"`
	// FirstEvent and LastEvent are the first and last events' times
	// (whole seconds, as the binary log keeps them); a closed file's last
	// event is its Rotate, written when the server closed it.
	FirstEvent time.Time `json:"firstEvent"`
	LastEvent  time.Time `json:"lastEvent"`
	// LastTransaction is the time of the last transaction's GTID event:
	// when its statement began, in whole seconds. Zero without one.
	LastTransaction time.Time `json:"lastTransaction,omitzero"`
	// Rotated tells that the file ends with a Rotate event: the server
	// closed it and wrote its successor.
	Rotated bool `json:"rotated"`
}

// Summarize reads the binary log file r.
func Summarize(r io.Reader) (Summary, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil {
		return Summary{}, fmt.Errorf("not a binary log: %w", err)
	}
	if !bytes.Equal(head, magic) {
		return Summary{}, errors.New("not a binary log: no magic number")
	}
	var (
		s      Summary
		header [headerSize]byte
		offset = int64(len(magic))
		seen   bool
	)
	for {
		if _, err := io.ReadFull(br, header[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return s, fmt.Errorf("the event at %d: %w", offset, err)
		}
		when := time.Unix(int64(binary.LittleEndian.Uint32(header[0:4])), 0).UTC()
		kind := header[4]
		server := binary.LittleEndian.Uint32(header[5:9])
		size := int64(binary.LittleEndian.Uint32(header[9:13]))
		if size < headerSize {
			return s, fmt.Errorf("the event at %d: size %d is shorter than its header", offset, size)
		}
		var body []byte
		switch kind {
		case typeGTID, typeGTIDList, typeMySQLGTID, typeMySQLPreviousGTIDs:
			body = make([]byte, size-headerSize)
			if _, err := io.ReadFull(br, body); err != nil {
				return s, fmt.Errorf("the event at %d: %w", offset, err)
			}
		default:
			if _, err := br.Discard(int(size - headerSize)); err != nil {
				return s, fmt.Errorf("the event at %d: %w", offset, err)
			}
		}
		if !seen {
			s.FirstEvent, seen = when, true
		}
		s.LastEvent = when
		s.Rotated = kind == typeRotate
		switch kind {
		case typeGTIDList:
			p, err := gtidList(body)
			if err != nil {
				return s, fmt.Errorf("the Gtid_list event at %d: %w", offset, err)
			}
			s.Start = p
			if s.Transactions == 0 {
				s.End = p
			}
		case typeMySQLPreviousGTIDs:
			p, err := previousGTIDs(body)
			if err != nil {
				return s, fmt.Errorf("the Previous_gtids event at %d: %w", offset, err)
			}
			s.Start = p
			if s.Transactions == 0 {
				s.End = p
			}
		case typeMySQLGTID:
			g, _, err := mysqlGTID(body)
			if err != nil {
				return s, fmt.Errorf("the GTID event at %d: %w", offset, err)
			}
			s.transaction(g, when)
		case typeMySQLAnonymousGTID:
			return s, fmt.Errorf("the event at %d is an anonymous transaction's: the server must run with gtid_mode=ON", offset)
		case typeMySQLTaggedGTID:
			return s, fmt.Errorf("the event at %d is a tagged GTID's: mydb's archive reads untagged GTIDs only", offset)
		case typeGTID:
			if len(body) < 12 {
				return s, fmt.Errorf("the GTID event at %d: %d bytes", offset, len(body))
			}
			s.transaction(GTID{Seq: binary.LittleEndian.Uint64(body[0:8]), Domain: binary.LittleEndian.Uint32(body[8:12]), Server: server}, when)
		}
		offset += size
	}
	if !seen {
		return s, errors.New("the binary log has no events")
	}
	return s, nil
}

// transaction records a transaction's GTID event.
func (s *Summary) transaction(g GTID, when time.Time) {
	if s.First.SeqOf(g) == 0 {
		s.First = s.First.With(g)
	}
	s.End = s.End.With(g)
	s.Transactions++
	s.LastTransaction = when
}

// gtidList reads a Gtid_list event's body: a count (its top 4 bits are
// flags), then domain, server and sequence of each.
func gtidList(body []byte) (Position, error) {
	if len(body) < 4 {
		return nil, fmt.Errorf("%d bytes", len(body))
	}
	n := int(binary.LittleEndian.Uint32(body[0:4]) & 0x0fffffff)
	if len(body) < 4+16*n {
		return nil, fmt.Errorf("%d GTIDs in %d bytes", n, len(body))
	}
	var p Position
	for i := range n {
		e := body[4+16*i:]
		p = p.With(GTID{Domain: binary.LittleEndian.Uint32(e[0:4]), Server: binary.LittleEndian.Uint32(e[4:8]), Seq: binary.LittleEndian.Uint64(e[8:16])})
	}
	return p, nil
}

// previousGTIDs reads MySQL's Previous_gtids event's body: a count of
// sources, then each one's UUID and intervals [start, end) (the body ends
// with the event's checksum, which is not read).
func previousGTIDs(body []byte) (Position, error) {
	if len(body) < 8 {
		return nil, fmt.Errorf("%d bytes", len(body))
	}
	n := binary.LittleEndian.Uint64(body[0:8])
	if n>>56 != 0 {
		// 8.3's tagged encoding marks its format in the top byte.
		return nil, errors.New("a tagged GTID set: mydb's archive reads untagged GTIDs only")
	}
	var p Position
	rest := body[8:]
	for range n {
		if len(rest) < 24 {
			return nil, fmt.Errorf("%d sources in %d bytes", n, len(body))
		}
		uuid := uuid.UUID(rest[0:16]).String()
		intervals := binary.LittleEndian.Uint64(rest[16:24])
		rest = rest[24:]
		if uint64(len(rest)) < 16*intervals {
			return nil, fmt.Errorf("%d intervals of %s in %d bytes", intervals, uuid, len(body))
		}
		if intervals != 1 || binary.LittleEndian.Uint64(rest[0:8]) != 1 {
			return nil, fmt.Errorf("the transactions of %s before this file have a gap or do not start at 1: mydb's archive needs them numbered from 1 without one", uuid)
		}
		p = p.With(GTID{UUID: uuid, Seq: binary.LittleEndian.Uint64(rest[8:16]) - 1})
		rest = rest[16*intervals:]
	}
	return p, nil
}

// mysqlGTIDPostHeader is the GTID event's fixed part: flags (1), the
// source's UUID (16), the sequence number (8), the logical clock's type
// code (1), last_committed and sequence_number (8 each); the commit
// timestamps follow.
const mysqlGTIDPostHeader = 1 + 16 + 8 + 1 + 8 + 8

// mysqlGTID reads MySQL's GTID event's body: the GTID, and when the
// transaction committed on the server that wrote this binary log
// (immediate_commit_timestamp, microseconds; zero when the event does not
// say). A promoted replica's file records when it applied what it
// replicated; the original source's time (original_commit_timestamp) is
// not read: it need not grow from one file to the next.
func mysqlGTID(body []byte) (GTID, time.Time, error) {
	if len(body) < 1+16+8 {
		return GTID{}, time.Time{}, fmt.Errorf("%d bytes", len(body))
	}
	g := GTID{UUID: uuid.UUID(body[1:17]).String(), Seq: binary.LittleEndian.Uint64(body[17:25])}
	if len(body) < mysqlGTIDPostHeader+7 {
		return g, time.Time{}, nil
	}
	// 7 bytes; the top bit says that original_commit_timestamp follows.
	const hasOriginal = uint64(1) << 55
	commit := uint56(body[mysqlGTIDPostHeader:mysqlGTIDPostHeader+7]) &^ hasOriginal
	return g, time.UnixMicro(int64(commit)).UTC(), nil
}

func uint56(b []byte) uint64 {
	var v uint64
	for i := 6; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// FirstCommitAfter reads the MySQL binary log file r and answers the
// offset of the first transaction that committed after t by the clock of
// the server that wrote r (its GTID event's offset), or -1 when every one
// committed at or before t. A restore to t replays the file up to there
// (mysqlbinlog --stop-position). The server writes transactions in the
// order of their commit timestamps.
func FirstCommitAfter(r io.Reader, t time.Time) (int64, error) {
	return findGTIDEvent(r, func(_ GTID, committed time.Time) (bool, error) {
		if committed.IsZero() {
			return false, errors.New("no commit timestamp")
		}
		return committed.After(t), nil
	})
}

// EndOfTransaction reads the MySQL binary log file r and answers the
// offset of the first GTID event after the one of g, where a replay that
// ends with g's transaction stops (mysqlbinlog --stop-position), or -1
// when g's transaction is the file's last. An error when r does not hold
// g.
func EndOfTransaction(r io.Reader, g GTID) (int64, error) {
	seen := false
	offset, err := findGTIDEvent(r, func(have GTID, _ time.Time) (bool, error) {
		if seen {
			return true, nil
		}
		seen = have == g
		return false, nil
	})
	if err == nil && !seen {
		return 0, fmt.Errorf("the file does not hold the transaction %s", g)
	}
	return offset, err
}

// findGTIDEvent reads the MySQL binary log file r and answers the offset
// of the first GTID event found accepts, or -1 when there is none.
func findGTIDEvent(r io.Reader, found func(g GTID, committed time.Time) (bool, error)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, magic) {
		return 0, errors.New("not a binary log")
	}
	var header [headerSize]byte
	offset := int64(len(magic))
	for {
		if _, err := io.ReadFull(br, header[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return -1, nil
			}
			return 0, fmt.Errorf("the event at %d: %w", offset, err)
		}
		size := int64(binary.LittleEndian.Uint32(header[9:13]))
		if size < headerSize {
			return 0, fmt.Errorf("the event at %d: size %d is shorter than its header", offset, size)
		}
		if header[4] != typeMySQLGTID {
			if _, err := br.Discard(int(size - headerSize)); err != nil {
				return 0, fmt.Errorf("the event at %d: %w", offset, err)
			}
			offset += size
			continue
		}
		body := make([]byte, size-headerSize)
		if _, err := io.ReadFull(br, body); err != nil {
			return 0, fmt.Errorf("the event at %d: %w", offset, err)
		}
		g, committed, err := mysqlGTID(body)
		if err == nil {
			var ok bool
			if ok, err = found(g, committed); ok {
				return offset, nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("the GTID event at %d: %w", offset, err)
		}
		offset += size
	}
}

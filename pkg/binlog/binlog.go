// Package binlog reads what a point-in-time restore needs to know of a
// MariaDB binary log file without replaying it: the GTID position before
// its first transaction, the GTIDs it holds, and the times of its events.
// It reads the event headers (binlog format v4) and the bodies of the two
// GTID events only; everything else is skipped by its length.
package binlog

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// magic begins every binary log file.
var magic = []byte{0xfe, 'b', 'i', 'n'}

// The event types read here (MariaDB's log_event.h).
const (
	typeRotate   = 4
	typeGTID     = 162 // GTID_EVENT: a transaction's GTID, before its events
	typeGTIDList = 163 // GTID_LIST_EVENT: the position before this file
)

// headerSize is the v4 event header: timestamp, type, server id, event
// size, next position, flags.
const headerSize = 19

// GTID is a MariaDB global transaction id, domain-server-sequence.
type GTID struct {
	Domain, Server uint32
	Seq            uint64
}

func (g GTID) String() string { return fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq) }

// Position is a GTID position: the last GTID of each replication domain,
// as MariaDB writes gtid_binlog_pos ("0-1-100,1-2-7"), by domain.
type Position []GTID

// ParsePosition reads a position as MariaDB writes it; "" is the empty
// position.
func ParsePosition(s string) (Position, error) {
	var p Position
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
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

// With is p with g as its domain's last GTID (when later than p's).
func (p Position) With(g GTID) Position {
	out := slices.Clone(p)
	for i, have := range out {
		if have.Domain == g.Domain {
			if g.Seq > have.Seq {
				out[i] = g
			}
			return out
		}
	}
	out = append(out, g)
	slices.SortFunc(out, func(a, b GTID) int { return cmp.Compare(a.Domain, b.Domain) })
	return out
}

// Seq is the sequence number of p's last GTID in domain, 0 without one.
func (p Position) Seq(domain uint32) uint64 {
	for _, g := range p {
		if g.Domain == domain {
			return g.Seq
		}
	}
	return 0
}

// Covers tells whether every GTID of q is at or before p's in its domain:
// a server at p has applied everything q names.
func (p Position) Covers(q Position) bool {
	for _, g := range q {
		if g.Seq > p.Seq(g.Domain) {
			return false
		}
	}
	return true
}

// Begin is the position the file begins at: its Gtid_list, or right
// before its first transaction of a domain the list has no GTID of (or an
// older one: a clone's first file).
func (s Summary) Begin() Position {
	p := s.Start
	for _, g := range s.First {
		if g.Seq-1 > p.Seq(g.Domain) {
			p = p.With(GTID{Domain: g.Domain, Server: g.Server, Seq: g.Seq - 1})
		}
	}
	return p
}

func (p Position) String() string {
	parts := make([]string, len(p))
	for i, g := range p {
		parts[i] = g.String()
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
		case typeGTID, typeGTIDList:
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
		case typeGTID:
			if len(body) < 12 {
				return s, fmt.Errorf("the GTID event at %d: %d bytes", offset, len(body))
			}
			g := GTID{Seq: binary.LittleEndian.Uint64(body[0:8]), Domain: binary.LittleEndian.Uint32(body[8:12]), Server: server}
			if s.First.Seq(g.Domain) == 0 {
				s.First = s.First.With(g)
			}
			s.End = s.End.With(g)
			s.Transactions++
			s.LastTransaction = when
		}
		offset += size
	}
	if !seen {
		return s, errors.New("the binary log has no events")
	}
	return s, nil
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

package binlog

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"
)

// The file MariaDB 10.11 wrote for two single-row inserts after three
// transactions, then closed (FLUSH BINARY LOGS): mariadb-binlog shows
// Gtid list [0-7-3], GTID 0-7-4, GTID 0-7-5, all at 11:41:57, and the
// Rotate at 11:42:25.
func TestSummarizeAFileMariaDBWrote(t *testing.T) {
	f, err := os.Open("testdata/mariadb-10.11.binlog")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Summarize(f)
	if err != nil {
		t.Fatal(err)
	}
	day := func(hms string) time.Time {
		at, err := time.Parse(time.DateTime, "2026-12-06 "+hms)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	if got := s.Start.String(); got != "0-7-3" {
		t.Errorf("Start = %s, want 0-7-3", got)
	}
	if got := s.Begin().String(); got != "0-7-3" {
		t.Errorf("Begin = %s, want 0-7-3", got)
	}
	if got := s.End.String(); got != "0-7-5" {
		t.Errorf("End = %s, want 0-7-5", got)
	}
	if s.Transactions != 2 {
		t.Errorf("Transactions = %d, want 2", s.Transactions)
	}
	if !s.FirstEvent.Equal(day("11:41:57")) || !s.LastTransaction.Equal(day("11:41:57")) || !s.LastEvent.Equal(day("11:42:25")) {
		t.Errorf("times: first %s, last transaction %s, last %s", s.FirstEvent, s.LastTransaction, s.LastEvent)
	}
	if !s.Rotated {
		t.Error("a closed file is not Rotated")
	}
}

// event is a v4 event of kind with body, at unix time at.
func event(at uint32, kind byte, server uint32, body []byte) []byte {
	h := make([]byte, headerSize)
	binary.LittleEndian.PutUint32(h[0:4], at)
	h[4] = kind
	binary.LittleEndian.PutUint32(h[5:9], server)
	binary.LittleEndian.PutUint32(h[9:13], uint32(headerSize+len(body)+4))
	crc := []byte{0, 0, 0, 0} // the checksum is skipped with the rest
	return append(append(h, body...), crc...)
}

func gtidBody(seq uint64, domain uint32) []byte {
	b := make([]byte, 13)
	binary.LittleEndian.PutUint64(b[0:8], seq)
	binary.LittleEndian.PutUint32(b[8:12], domain)
	return b
}

func listBody(gs ...GTID) []byte {
	b := make([]byte, 4, 4+16*len(gs))
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(gs))|0x10000000) // a flag in the top bits
	for _, g := range gs {
		e := make([]byte, 16)
		binary.LittleEndian.PutUint32(e[0:4], g.Domain)
		binary.LittleEndian.PutUint32(e[4:8], g.Server)
		binary.LittleEndian.PutUint64(e[8:16], g.Seq)
		b = append(b, e...)
	}
	return b
}

func TestSummarizeTwoDomainsAndAnOpenFile(t *testing.T) {
	var f bytes.Buffer
	f.Write(magic)
	f.Write(event(100, 15, 1, make([]byte, 40))) // format description
	f.Write(event(100, typeGTIDList, 1, listBody(GTID{Domain: 0, Server: 1, Seq: 10}, GTID{Domain: 2, Server: 1, Seq: 4})))
	f.Write(event(101, typeGTID, 1, gtidBody(11, 0)))
	f.Write(event(101, 30, 1, make([]byte, 20))) // rows
	f.Write(event(103, typeGTID, 3, gtidBody(5, 2)))
	f.Write(event(104, typeGTID, 3, gtidBody(1, 1)))
	s, err := Summarize(&f)
	if err != nil {
		t.Fatal(err)
	}
	if s.Start.String() != "0-1-10,2-1-4" || s.End.String() != "0-1-11,1-3-1,2-3-5" {
		t.Errorf("Start %s, End %s", s.Start, s.End)
	}
	if s.Rotated || s.Transactions != 3 || s.LastTransaction.Unix() != 104 || s.FirstEvent.Unix() != 100 {
		t.Errorf("%+v", s)
	}
	if s.First.String() != "0-1-11,1-3-1,2-3-5" || s.Begin().String() != "0-1-10,2-1-4" {
		t.Errorf("First %s, Begin %s", s.First, s.Begin())
	}
}

// A clone's first file: an empty Gtid_list, then transactions that follow
// the clone's position 0-1-41.
func TestTheFirstFileOfACloneBeginsBeforeItsFirstTransaction(t *testing.T) {
	var f bytes.Buffer
	f.Write(magic)
	f.Write(event(100, typeGTIDList, 2, listBody()))
	f.Write(event(101, typeGTID, 1, gtidBody(42, 0)))
	f.Write(event(101, typeGTID, 1, gtidBody(43, 0)))
	s, err := Summarize(&f)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Start) != 0 || s.Begin().String() != "0-1-41" || s.End.String() != "0-1-43" {
		t.Errorf("Start %q, Begin %s, End %s", s.Start, s.Begin(), s.End)
	}
}

func TestSummarizeRefusesWhatIsNotABinlog(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":     nil,
		"no magic":  []byte("SELECT 1;"),
		"no events": magic,
		"cut short": append(append([]byte{}, magic...), event(1, typeGTID, 1, gtidBody(1, 0))[:25]...),
		"too short size": func() []byte {
			e := event(1, 2, 1, nil)
			binary.LittleEndian.PutUint32(e[9:13], 3)
			return append(append([]byte{}, magic...), e...)
		}(),
		"short GTID": append(append([]byte{}, magic...), event(1, typeGTID, 1, []byte{1, 2})...),
		"short list": append(append([]byte{}, magic...), event(1, typeGTIDList, 1, []byte{5, 0, 0, 0})...),
		// MySQL's: a gap before the file, a set not from 1, a tagged
		// set, a transaction without a GTID, a tagged GTID.
		"a gap":         append(append([]byte{}, magic...), event(1, typeMySQLPreviousGTIDs, 1, previousBody(1, 5, 7, 9))...),
		"not from 1":    append(append([]byte{}, magic...), event(1, typeMySQLPreviousGTIDs, 1, previousBody(3, 5))...),
		"tagged set":    append(append([]byte{}, magic...), event(1, typeMySQLPreviousGTIDs, 1, append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, make([]byte, 40)...))...),
		"short sources": append(append([]byte{}, magic...), event(1, typeMySQLPreviousGTIDs, 1, previousBody(1, 5)[:30])...),
		"anonymous":     append(append([]byte{}, magic...), event(1, typeMySQLAnonymousGTID, 1, make([]byte, 60))...),
		"tagged GTID":   append(append([]byte{}, magic...), event(1, typeMySQLTaggedGTID, 1, make([]byte, 60))...),
	} {
		if _, err := Summarize(bytes.NewReader(data)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestPosition(t *testing.T) {
	p, err := ParsePosition(" 0-1-100, 1-2-7 ")
	if err != nil {
		t.Fatal(err)
	}
	if p.String() != "0-1-100,1-2-7" || p.SeqOf(GTID{Domain: 1}) != 7 || p.SeqOf(GTID{Domain: 3}) != 0 {
		t.Errorf("%s", p)
	}
	if q := p.With(GTID{Domain: 0, Server: 9, Seq: 50}); q.String() != "0-1-100,1-2-7" {
		t.Errorf("an earlier GTID replaced a later one: %s", q)
	}
	if q := p.With(GTID{Domain: 0, Server: 9, Seq: 101}); q.String() != "0-9-101,1-2-7" || p.String() != "0-1-100,1-2-7" {
		t.Errorf("With: %s (p %s)", q, p)
	}
	later, _ := ParsePosition("0-1-100")
	if !p.Covers(later) || later.Covers(p) {
		t.Error("Covers")
	}
	mysql, err := ParsePosition("27F38A7F-F187-11F1-B797-02FC00000001:1-5,11111111-2222-3333-4444-555555555555:1")
	if err != nil || mysql.String() != "11111111-2222-3333-4444-555555555555:1-1,27f38a7f-f187-11f1-b797-02fc00000001:1-5" {
		t.Errorf("a MySQL set: %s, %v", mysql, err)
	}
	if q := mysql.With(GTID{UUID: "27f38a7f-f187-11f1-b797-02fc00000001", Seq: 9}); !q.Covers(mysql) || mysql.Covers(q) {
		t.Errorf("With a MySQL GTID: %s", q)
	}
	if empty, err := ParsePosition(""); err != nil || len(empty) != 0 || !empty.Covers(nil) {
		t.Errorf("empty: %v %v", empty, err)
	}
	for _, bad := range []string{"0-1", "a-b-c", "0-1-2-3", "0-99999999999-1",
		"27f38a7f:1-5", "27f38a7f-f187-11f1-b797-02fc00000001:1-5:7-9", "27f38a7f-f187-11f1-b797-02fc00000001:3-5",
		"27f38a7f-f187-11f1-b797-02fc00000001:x", "27f38a7f-f187-11f1-b797-02fc00000001:5-3"} {
		if _, err := ParsePosition(bad); err == nil || !strings.Contains(err.Error(), "GTID") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The file MySQL 9.7 wrote for four single-row inserts after three
// transactions of its own, one of them under another source's UUID
// (SET gtid_next), then closed: mysqlbinlog shows Previous-GTIDs
// 27f38a7f-...:1-3, then ...:4, ...:5, 11111111-...:1, ...:6, all at
// 15:10:31, committed at .922575, .923077, .923812 and .924451, and the
// Rotate.
func TestSummarizeAFileMySQLWrote(t *testing.T) {
	const (
		server = "27f38a7f-f187-11f1-b797-02fc00000001"
		other  = "11111111-2222-3333-4444-555555555555"
	)
	b, err := os.ReadFile("testdata/mysql-9.7.binlog")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Start.String(); got != server+":1-3" {
		t.Errorf("Start = %s", got)
	}
	if got := s.Begin().String(); got != server+":1-3" {
		t.Errorf("Begin = %s", got)
	}
	if got, want := s.End.String(), other+":1-1,"+server+":1-6"; got != want {
		t.Errorf("End = %s, want %s", got, want)
	}
	if got, want := s.First.String(), other+":1-1,"+server+":1-4"; got != want {
		t.Errorf("First = %s, want %s", got, want)
	}
	second := time.Date(2026, 12, 6, 15, 10, 31, 0, time.UTC)
	if s.Transactions != 4 || !s.Rotated || !s.LastEvent.Equal(second) || !s.LastTransaction.Equal(second) {
		t.Errorf("%+v", s)
	}
	// The End is what the server's gtid_executed said after the file,
	// which breaks its line after a comma.
	executed, err := ParsePosition(other + ":1,\n" + server + ":1-6")
	if err != nil || !executed.Covers(s.End) || !s.End.Covers(executed) {
		t.Errorf("gtid_executed %s (%v), End %s", executed, err, s.End)
	}

	for _, c := range []struct {
		gtid string
		want int64
	}{
		{server + ":4", 485},
		{other + ":1", 1059},
		{server + ":6", -1},
	} {
		g, err := ParseGTID(c.gtid)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := EndOfTransaction(bytes.NewReader(b), g); err != nil || got != c.want {
			t.Errorf("EndOfTransaction(%s) = %d, %v; want %d", c.gtid, got, err, c.want)
		}
	}
	if _, err := EndOfTransaction(bytes.NewReader(b), GTID{UUID: server, Seq: 3}); err == nil || !strings.Contains(err.Error(), "does not hold") {
		t.Errorf("EndOfTransaction of a GTID before the file: %v", err)
	}

	at := func(micro int) time.Time { return second.Add(time.Duration(micro) * time.Microsecond) }
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{second, 198},      // before the first commit: stop at its GTID event
		{at(922575), 485},  // the first commit is at the target: inclusive
		{at(923076), 485},  // one microsecond before the second
		{at(923812), 1059}, // after the third (the other source's)
		{at(924451), -1},   // every transaction
		{second.Add(time.Hour), -1},
	} {
		got, err := FirstCommitAfter(bytes.NewReader(b), c.t)
		if err != nil || got != c.want {
			t.Errorf("FirstCommitAfter(%s) = %d, %v; want %d", c.t.Format(time.RFC3339Nano), got, err, c.want)
		}
	}
}

// previousBody is a Previous_gtids body of one source with the intervals
// [bounds[0], bounds[1]), ...
func previousBody(bounds ...uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, 1)
	b = append(b, bytes.Repeat([]byte{0xab}, 16)...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(bounds)/2))
	for _, v := range bounds {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func TestParseGTID(t *testing.T) {
	for in, want := range map[string]GTID{
		"0-1-4711": {Domain: 0, Server: 1, Seq: 4711},
		" 2-7-9 ":  {Domain: 2, Server: 7, Seq: 9},
		"3E11FA47-71CA-11E1-9E33-C80AA9429562:23": {UUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562", Seq: 23},
	} {
		if got, err := ParseGTID(in); err != nil || got != want {
			t.Errorf("ParseGTID(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0-1", "0-1-2,0-1-3", "3e11fa47-71ca-11e1-9e33-c80aa9429562:0",
		"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "3e11fa47-71ca-11e1-9e33-c80aa942956z:5", "3e11fa47:5"} {
		if g, err := ParseGTID(bad); err == nil {
			t.Errorf("ParseGTID(%q) = %+v, want an error", bad, g)
		}
	}
}

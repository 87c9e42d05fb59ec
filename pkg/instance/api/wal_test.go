package api

import "testing"

func TestWALSegment(t *testing.T) {
	for name, want := range map[string]struct {
		tli uint32
		seg uint64
		ok  bool
	}{
		"000000010000000000000003":         {1, 3, true},
		"0000000200000001000000FF":         {2, 256 + 255, true},
		"000000010000000100000000":         {1, 256, true},
		"00000002.history":                 {},
		"000000010000000000000003.partial": {},
		"000000010000000000000100":         {}, // past a log file's 256 segments
		"00000001000000000000000g":         {},
	} {
		tli, seg, ok := WALSegment(name)
		if tli != want.tli || seg != want.seg || ok != want.ok {
			t.Errorf("WALSegment(%q) = %d, %d, %v; want %+v", name, tli, seg, ok, want)
		}
	}
	for lsn, want := range map[string]uint64{"0/3000148": 3, "0/2FFFFFF": 2, "1/0": 256, "1/FF000028": 511} {
		if got, err := LSNSegment(lsn); err != nil || got != want {
			t.Errorf("LSNSegment(%q) = %d, %v; want %d", lsn, got, err, want)
		}
	}
	if _, err := LSNSegment("nope"); err == nil {
		t.Error("LSNSegment took a non-LSN")
	}
}

func TestWALSegmentName(t *testing.T) {
	for _, name := range []string{"000000010000000000000001", "0000000100000000000000FF", "0000000A0000000100000000"} {
		tli, seg, ok := WALSegment(name)
		if !ok || WALSegmentName(tli, seg) != name {
			t.Errorf("%s: %d %d %v, named back %s", name, tli, seg, ok, WALSegmentName(tli, seg))
		}
	}
	if got := WALSegmentName(1, 256); got != "000000010000000100000000" {
		t.Errorf("segment 256 is %s", got)
	}
}

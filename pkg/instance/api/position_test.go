package api

import "testing"

func TestPositionReached(t *testing.T) {
	for _, c := range []struct {
		name     string
		p, final Position
		want     bool
	}{
		{"lsn equal", Position{Timeline: 1, LSN: "0/3000029"}, Position{Timeline: 1, LSN: "0/3000029"}, true},
		{"lsn past", Position{Timeline: 1, LSN: "1/0"}, Position{Timeline: 1, LSN: "0/FFFFFFFF"}, true},
		{"lsn behind", Position{Timeline: 1, LSN: "0/3000028"}, Position{Timeline: 1, LSN: "0/3000029"}, false},
		{"other timeline", Position{Timeline: 2, LSN: "0/4000000"}, Position{Timeline: 1, LSN: "0/3000029"}, false},
		{"gtid equal", Position{GTID: "0-1-42"}, Position{GTID: "0-1-42"}, true},
		{"gtid past", Position{GTID: "0-2-50"}, Position{GTID: "0-1-42"}, true},
		{"gtid behind", Position{GTID: "0-1-41"}, Position{GTID: "0-1-42"}, false},
		{"gtid missing domain", Position{GTID: "0-1-42"}, Position{GTID: "0-1-42,1-1-3"}, false},
		{"gtid empty final", Position{GTID: "0-1-1"}, Position{GTID: ""}, false},
		{"mysql set", Position{GTID: "u1:1-42"}, Position{GTID: "u1:1-40"}, true},
		{"unparsable", Position{LSN: "x"}, Position{LSN: "0/1"}, false},
	} {
		if got := c.p.Reached(c.final); got != c.want {
			t.Errorf("%s: %+v reached %+v = %v, want %v", c.name, c.p, c.final, got, c.want)
		}
	}
	if (Position{Timeline: 1, LSN: "0/5"}).Compare(Position{Timeline: 1, LSN: "0/4"}) != 1 {
		t.Error("compare ahead")
	}
	if FormatLSN(0x1_0000_0001) != "1/1" {
		t.Error(FormatLSN(0x1_0000_0001))
	}
}

func TestMergeGTIDs(t *testing.T) {
	for _, c := range []struct {
		name  string
		lists []string
		want  string
	}{
		{"relay log ahead", []string{"0-1-40", "0-1-42"}, "0-1-42"},
		{"applied ahead (relay log purged at a restart)", []string{"0-1-42", "0-1-7"}, "0-1-42"},
		{"per domain", []string{"0-1-40,1-2-9", "0-1-42,1-2-3"}, "0-1-42,1-2-9"},
		{"a domain only in the relay log", []string{"0-1-40", "0-1-40,2-3-1"}, "0-1-40,2-3-1"},
		{"nothing received", []string{"0-1-40", ""}, "0-1-40"},
		{"empty", []string{"", ""}, ""},
		{"mysql sets", []string{"u1:1-40", "u1:38-45"}, "u1:38-45"},
		{"unparsable keeps the first", []string{"0-1-40", "junk"}, "0-1-40"},
	} {
		got := MergeGTIDs(c.lists...)
		if got != c.want {
			t.Errorf("%s: MergeGTIDs(%q) = %q, want %q", c.name, c.lists, got, c.want)
		}
		// The merge is at or beyond each list it merged.
		for _, l := range c.lists {
			if l != "" && c.name != "unparsable keeps the first" && !(Position{GTID: got}).Reached(Position{GTID: l}) {
				t.Errorf("%s: %q does not reach %q", c.name, got, l)
			}
		}
	}
}

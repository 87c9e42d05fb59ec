package rollout

import (
	"testing"
	"time"
)

func TestSlots(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	s := &Slots{Max: 2, Stale: 10 * time.Minute}
	steps := []struct {
		key      string
		at       time.Duration
		release  bool
		wantOK   bool
		wantHeld int
	}{
		{key: "a", wantOK: true},
		{key: "b", wantOK: true, wantHeld: 1},
		{key: "c", wantOK: false, wantHeld: 2},
		{key: "a", at: time.Minute, wantOK: true}, // a holder steps on
		{key: "b", release: true},
		{key: "c", at: 2 * time.Minute, wantOK: true, wantHeld: 1},
		{key: "d", at: 3 * time.Minute, wantOK: false, wantHeld: 2},
		// a's last step was at 1 min: by 11 min it no longer counts.
		{key: "c", at: 10 * time.Minute, wantOK: true},
		{key: "d", at: 11 * time.Minute, wantOK: true, wantHeld: 1},
	}
	for i, st := range steps {
		if st.release {
			s.Release(st.key)
			continue
		}
		ok, held := s.Take(st.key, t0.Add(st.at))
		if ok != st.wantOK || held != st.wantHeld {
			t.Errorf("step %d: Take(%s) = %v, %d; want %v, %d", i, st.key, ok, held, st.wantOK, st.wantHeld)
		}
	}
	unbounded := &Slots{}
	for _, key := range []string{"a", "b", "c"} {
		if ok, _ := unbounded.Take(key, t0); !ok {
			t.Errorf("Max 0 refused %s", key)
		}
	}
}

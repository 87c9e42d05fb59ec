package rollout

import (
	"sync"
	"time"
)

// Slots bounds how many databases one controller rolls out at once, so
// that a new mydb (a new instance manager image is a new template for every
// database) does not replace pods, and switch over, everywhere at once. A
// database takes a slot with the first pod it replaces and keeps it until
// its rollout is complete; one that has taken no step for Stale (a rollout
// stuck on a pod that never serves) no longer counts, so it cannot hold
// every other database back. Slots are per leader, in memory: a new leader
// starts with none taken, which can only let more rollouts run for a while.
type Slots struct {
	// Max is how many databases may roll out at once; 0 is no bound.
	Max int
	// Stale is how long a database may take no step and still count.
	Stale time.Duration

	mu    sync.Mutex
	taken map[string]time.Time // by database, its last step
}

// Take tells whether the database key may take a step now, taking or
// refreshing its slot if so; held says how many other databases count
// against the bound.
func (s *Slots) Take(key string, now time.Time) (ok bool, held int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken == nil {
		s.taken = map[string]time.Time{}
	}
	if _, mine := s.taken[key]; mine || s.Max <= 0 {
		s.taken[key] = now
		return true, 0
	}
	for other, last := range s.taken {
		if s.Stale > 0 && now.Sub(last) >= s.Stale {
			delete(s.taken, other)
			continue
		}
		held++
	}
	if held >= s.Max {
		return false, held
	}
	s.taken[key] = now
	return true, held
}

// Release frees key's slot: its rollout is complete, or it is gone.
func (s *Slots) Release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.taken, key)
}

// Package livelag reads each replica's replication lag from its instance
// manager when a table of MyDatabases is printed (kubectl get mdb -o wide):
// live, at read time, and never written to etcd, where a figure that
// changes with every write would cost a status write each poll.
//
// Reads stay fast: an answer is kept for TTL, a table waits at most Budget
// for the answers it lacks (those that come later serve the next read),
// and at most Parallel managers are asked at once, so a list of many
// databases, or many clients listing, cost the managers at most one status
// read per instance per TTL.
package livelag

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Defaults of Reader's bounds.
const (
	DefaultTTL      = 2 * time.Second
	DefaultBudget   = 250 * time.Millisecond
	DefaultParallel = 32
	// askTimeout bounds one manager's answer, which goes on after the table
	// that asked stopped waiting.
	askTimeout = 2 * time.Second
)

// Unknown is a replica's lag when its manager did not answer in time.
const Unknown = "?"

// StatusReader is what the Reader asks a manager (api.Client.Status).
type StatusReader interface {
	Status(ctx context.Context, host string, auth api.Auth) (*api.Status, error)
}

// Reader reads and keeps the replicas' lag.
type Reader struct {
	// Credentials are the controller's for a database's managers
	// (databaseca.Authority.Credentials).
	Credentials func(namespace, db string) (*api.Credentials, error)
	Managers    StatusReader
	// TTL, Budget and Parallel: the bounds above (0: the defaults).
	TTL, Budget time.Duration
	Parallel    int
	Now         func() time.Time

	mu      sync.Mutex
	answers map[string]answer
	asking  map[string]chan struct{}
	slots   chan struct{}
	// swept is when answers were last swept of the old ones.
	swept time.Time
}

type answer struct {
	text string
	at   time.Time
}

// replica is one instance to ask.
type replica struct {
	key, namespace, db, name, address string
}

// Prefetch asks the managers of dbs' replicas whose lag is not known as of
// TTL ago, and waits for their answers at most Budget.
func (r *Reader) Prefetch(ctx context.Context, dbs ...*example.MyDatabase) {
	var waits []chan struct{}
	for _, db := range dbs {
		for _, in := range replicas(db) {
			if ch := r.ask(in); ch != nil {
				waits = append(waits, ch)
			}
		}
	}
	if len(waits) == 0 {
		return
	}
	budget := r.Budget
	if budget == 0 {
		budget = DefaultBudget
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Text is db's replicas' lag as known now: "shop-1=0s shop-2=1.5s", a
// replica whose manager has not answered (Unknown), "<none>" without
// replicas.
func (r *Reader) Text(db *example.MyDatabase) string {
	var parts []string
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, in := range replicas(db) {
		text := Unknown
		if a, ok := r.answers[in.key]; ok && r.now().Sub(a.at) <= 2*r.ttl() {
			text = a.text
		}
		parts = append(parts, in.name+"="+text)
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, " ")
}

// replicas are db's replicas that have an address, by name.
func replicas(db *example.MyDatabase) []replica {
	var out []replica
	for _, in := range db.Status.Instances {
		if in.Name == db.Status.CurrentPrimary || in.Role != example.InstanceRoleReplica || in.Address == "" {
			continue
		}
		out = append(out, replica{key: db.Namespace + "/" + db.Name + "/" + in.Name + "/" + in.Address,
			namespace: db.Namespace, db: db.Name, name: in.Name, address: in.Address})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// ask starts asking in's manager unless a fresh answer is known; it
// returns what closes once the answer is in (nil when none is awaited).
func (r *Reader) ask(in replica) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.answers[in.key]; ok && r.now().Sub(a.at) <= r.ttl() {
		return nil
	}
	if ch, ok := r.asking[in.key]; ok {
		return ch
	}
	if r.asking == nil {
		r.asking, r.answers = map[string]chan struct{}{}, map[string]answer{}
		parallel := r.Parallel
		if parallel == 0 {
			parallel = DefaultParallel
		}
		r.slots = make(chan struct{}, parallel)
	}
	ch := make(chan struct{})
	r.asking[in.key] = ch
	go func() {
		text := r.read(in)
		r.mu.Lock()
		now := r.now()
		r.answers[in.key] = answer{text: text, at: now}
		delete(r.asking, in.key)
		// Forget, once a minute, the replicas nobody asked about for a
		// minute (deleted databases, replaced pods): a sweep per answer
		// would cost a list of n replicas n^2.
		if now.Sub(r.swept) > time.Minute {
			r.swept = now
			for key, a := range r.answers {
				if now.Sub(a.at) > time.Minute {
					delete(r.answers, key)
				}
			}
		}
		r.mu.Unlock()
		close(ch)
	}()
	return ch
}

// read asks in's manager for its lag.
func (r *Reader) read(in replica) string {
	r.slots <- struct{}{}
	defer func() { <-r.slots }()
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	defer cancel()
	creds, err := r.Credentials(in.namespace, in.db)
	if err != nil {
		return Unknown
	}
	s, err := r.Managers.Status(ctx, in.address, api.Auth{Credentials: creds, Name: in.name})
	if err != nil || s.Name != in.name {
		return Unknown
	}
	return Format(s)
}

// Format is a replica's lag as its manager reported it: seconds, to the
// millisecond below 10 s; "not streaming" when it does not.
func Format(s *api.Status) string {
	switch {
	case !s.Streaming:
		return "not-streaming"
	case s.LagSeconds == nil:
		return Unknown
	case *s.LagSeconds < 10:
		return strconv.FormatFloat(roundTo(*s.LagSeconds, 1000), 'f', -1, 64) + "s"
	default:
		return fmt.Sprintf("%.0fs", *s.LagSeconds)
	}
}

func roundTo(v float64, per float64) float64 { return float64(int64(v*per+0.5)) / per }

func (r *Reader) ttl() time.Duration {
	if r.TTL == 0 {
		return DefaultTTL
	}
	return r.TTL
}

func (r *Reader) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

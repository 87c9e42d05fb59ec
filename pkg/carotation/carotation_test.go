package carotation

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	trusting := func(name string, roots ...string) Instance {
		return Instance{Name: name, Reported: true, Roots: roots, Issuer: "old-issuer"}
	}
	holding := func(name, issuer string) Instance {
		return Instance{Name: name, Reported: true, Roots: []string{"old", "new"}, Issuer: issuer}
	}
	silent := Instance{Name: "db-2"}

	tests := []struct {
		name string
		in   Input
		want Step
	}{
		{
			name: "nothing asked, the root far from its end",
			in:   Input{Now: now, RenewAt: now.Add(time.Hour), Requested: "a", Handled: "a"},
			want: Step{},
		},
		{
			name: "after a rotation, an instance that still trusts the previous root holds its end",
			in: Input{Now: now, RenewAt: now.Add(time.Hour), Requested: "b", Handled: "b", ActiveRoot: "new",
				Instances: []Instance{trusting("db-0", "new"), trusting("db-1", "new", "old"), silent}},
			want: Step{Waiting: "waiting for [db-1] to stop trusting the previous root"},
		},
		{
			name: "after a rotation, every instance that answers trusts the active root alone: done",
			in: Input{Now: now, RenewAt: now.Add(time.Hour), Requested: "b", Handled: "b", ActiveRoot: "new",
				Instances: []Instance{trusting("db-0", "new"), silent}},
			want: Step{},
		},
		{
			name: "a new request begins a rotation",
			in:   Input{Now: now, RenewAt: now.Add(time.Hour), Requested: "b", Handled: "a"},
			want: Step{Action: Begin, Reason: ReasonRequested},
		},
		{
			name: "the first request begins one",
			in:   Input{Now: now, RenewAt: now.Add(time.Hour), Requested: "a"},
			want: Step{Action: Begin, Reason: ReasonRequested},
		},
		{
			name: "a root at two thirds of its life is replaced unasked",
			in:   Input{Now: now, RenewAt: now},
			want: Step{Action: Begin, Reason: ReasonExpiring},
		},
		{
			name: "introducing: an instance that does not trust the new root yet holds it",
			in: Input{Now: now, Phase: Introducing, PhaseSince: now.Add(-time.Hour), NewRoot: "new",
				Instances: []Instance{trusting("db-0", "old", "new"), trusting("db-1", "old")}},
			want: Step{Waiting: "waiting for [db-1] to trust the new root"},
		},
		{
			name: "introducing: an instance that does not answer holds it",
			in: Input{Now: now, Phase: Introducing, PhaseSince: now.Add(-time.Hour), NewRoot: "new",
				Instances: []Instance{trusting("db-0", "old", "new"), silent}},
			want: Step{Waiting: "waiting for [db-2] to answer (they must trust the new root)"},
		},
		{
			name: "introducing: all trust it, but applications get the overlap",
			in: Input{Now: now, Phase: Introducing, PhaseSince: now.Add(-time.Minute), MinOverlap: 10 * time.Minute, NewRoot: "new",
				Instances: []Instance{trusting("db-0", "old", "new"), trusting("db-1", "new", "old")}},
			want: Step{Waiting: "both roots are trusted until 2026-12-05T12:09:00Z, for applications to read the new CA bundle"},
		},
		{
			name: "introducing: all trust it after the overlap: the new root signs",
			in: Input{Now: now, Phase: Introducing, PhaseSince: now.Add(-10 * time.Minute), MinOverlap: 10 * time.Minute, NewRoot: "new",
				Instances: []Instance{trusting("db-0", "old", "new"), trusting("db-1", "new", "old")}},
			want: Step{Action: Switch},
		},
		{
			name: "introducing with no pods (hibernated): they will mount what is current",
			in:   Input{Now: now, Phase: Introducing, PhaseSince: now, NewRoot: "new"},
			want: Step{Action: Switch},
		},
		{
			name: "introducing ignores a new request until the rotation ends",
			in: Input{Now: now, Phase: Introducing, PhaseSince: now, NewRoot: "new", Requested: "c", Handled: "b",
				Instances: []Instance{trusting("db-0", "old")}},
			want: Step{Waiting: "waiting for [db-0] to trust the new root"},
		},
		{
			name: "switched: an instance with a certificate of the old issuer holds the end",
			in: Input{Now: now, Phase: Switched, Issuer: "new-issuer",
				Instances: []Instance{holding("db-0", "new-issuer"), holding("db-1", "old-issuer")}},
			want: Step{Waiting: "waiting for [db-1] to hold a certificate of the new root"},
		},
		{
			name: "switched: every instance holds one: the old root goes",
			in: Input{Now: now, Phase: Switched, Issuer: "new-issuer",
				Instances: []Instance{holding("db-0", "new-issuer"), holding("db-1", "new-issuer")}},
			want: Step{Action: Finish},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Next(tt.in); got != tt.want {
				t.Errorf("Next() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

package rollout

import (
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestNext(t *testing.T) {
	at := func(lsn string) *api.Position { return &api.Position{Timeline: 1, LSN: lsn} }
	// old: serves, runs the old template; fresh: serves, runs the new one.
	old := func(name string) Instance { return Instance{Name: name, Ready: true, Position: at("0/3000000")} }
	fresh := func(name string) Instance {
		return Instance{Name: name, Updated: true, Ready: true, Position: at("0/3000000")}
	}
	with := func(i Instance, change func(*Instance)) Instance { change(&i); return i }
	unready := func(i *Instance) { i.Ready = false }
	terminating := func(i *Instance) { i.Terminating = true }
	three := func(a, b, c Instance) Input {
		return Input{Primary: "db-1", Instances: []Instance{a, b, c}, Want: 3, Observed: true}
	}
	major := func(in Input) Input { in.MajorUpgrade = true; return in }

	tests := []struct {
		name string
		in   Input
		want Step
	}{
		{
			name: "nothing to do",
			in:   three(fresh("db-0"), fresh("db-1"), fresh("db-2")),
			want: Step{Updated: 3, Complete: true},
		},
		{
			name: "the StatefulSet controller has not read the template",
			in:   Input{Primary: "db-1", Instances: []Instance{old("db-0"), old("db-1")}, Want: 2},
			want: Step{Waiting: "the StatefulSet controller has not read the new template yet"},
		},
		{
			name: "a major upgrade: the replicas first, not waiting for the replaced ones to serve",
			in:   major(three(old("db-0"), old("db-1"), with(fresh("db-2"), unready))),
			want: Step{Updated: 1, Delete: "db-0"},
		},
		{
			name: "a major upgrade: then the primary, with no switchover (no updated replica can serve yet)",
			in:   major(three(with(fresh("db-0"), unready), old("db-1"), with(fresh("db-2"), unready))),
			want: Step{Updated: 2, Delete: "db-1"},
		},
		{
			name: "a major upgrade: one pod at a time",
			in:   major(three(old("db-0"), old("db-1"), with(fresh("db-2"), terminating))),
			want: Step{Waiting: "db-2 is being replaced"},
		},
		{
			name: "a major upgrade: done once every pod runs the new major",
			in:   major(three(with(fresh("db-0"), unready), with(fresh("db-1"), unready), fresh("db-2"))),
			want: Step{Updated: 3, Complete: true},
		},
		{
			name: "replicas first, the highest ordinal first, whatever the primary's ordinal",
			in:   three(old("db-0"), old("db-1"), old("db-2")),
			want: Step{Delete: "db-2"},
		},
		{
			name: "the next replica only once the replaced one streams again",
			in:   three(old("db-0"), old("db-1"), with(fresh("db-2"), unready)),
			want: Step{Updated: 1, Waiting: "db-2 runs the new template but does not serve yet"},
		},
		{
			name: "not while a replaced pod is still terminating",
			in:   three(old("db-0"), old("db-1"), with(old("db-2"), terminating)),
			want: Step{Waiting: "db-2 is being replaced"},
		},
		{
			name: "not while a pod is missing",
			in:   Input{Primary: "db-1", Instances: []Instance{old("db-0"), old("db-1")}, Want: 3, Observed: true},
			want: Step{Waiting: "2 of 3 instances have a pod"},
		},
		{
			name: "then the other replica",
			in:   three(old("db-0"), old("db-1"), fresh("db-2")),
			want: Step{Updated: 1, Delete: "db-0"},
		},
		{
			name: "an old replica that does not serve is replaced without waiting for the others",
			in:   three(with(old("db-0"), unready), old("db-1"), with(fresh("db-2"), unready)),
			want: Step{Updated: 1, Delete: "db-0"},
		},
		{
			name: "the primary last: a switchover to the most advanced updated replica",
			in:   three(fresh("db-0"), old("db-1"), with(fresh("db-2"), func(i *Instance) { i.Position = at("0/3000100") })),
			want: Step{Updated: 2, SwitchoverTo: "db-2"},
		},
		{
			name: "ties go to the lowest ordinal",
			in:   three(fresh("db-0"), old("db-1"), fresh("db-2")),
			want: Step{Updated: 2, SwitchoverTo: "db-0"},
		},
		{
			name: "no switchover while one is under way",
			in: func() Input {
				in := three(fresh("db-0"), old("db-1"), fresh("db-2"))
				in.Busy = "a switchover is under way"
				return in
			}(),
			want: Step{Updated: 2, Waiting: "a switchover is under way"},
		},
		{
			name: "after the switchover the old primary is a replica, replaced even before it streams",
			in: Input{Primary: "db-0", Want: 3, Observed: true,
				Instances: []Instance{fresh("db-0"), with(old("db-1"), unready), fresh("db-2")}},
			want: Step{Updated: 2, Delete: "db-1"},
		},
		{
			name: "nothing is touched while the primary does not serve: the replicas are the failover's",
			in:   three(with(old("db-0"), unready), with(old("db-1"), unready), old("db-2")),
			want: Step{Waiting: "the primary db-1 does not serve"},
		},
		{
			name: "nothing has served past the failover delay: replicas first, without waiting for them",
			in: func() Input {
				in := three(with(old("db-0"), unready), with(old("db-1"), unready), with(fresh("db-2"), unready))
				in.Broken = true
				return in
			}(),
			want: Step{Updated: 1, Delete: "db-0"},
		},
		{
			name: "nothing serves: then the primary",
			in: func() Input {
				in := three(with(fresh("db-0"), unready), with(old("db-1"), unready), with(fresh("db-2"), unready))
				in.Broken = true
				return in
			}(),
			want: Step{Updated: 2, Delete: "db-1"},
		},
		{
			name: "nothing serves: one pod at a time",
			in: func() Input {
				in := three(with(old("db-0"), unready), with(old("db-1"), unready), with(fresh("db-2"), terminating))
				in.Broken = true
				return in
			}(),
			want: Step{Waiting: "db-2 is being replaced"},
		},
		{
			name: "the primary has no pod",
			in:   Input{Primary: "db-1", Instances: []Instance{old("db-0")}, Want: 2, Observed: true},
			want: Step{Waiting: "the primary db-1 has no pod"},
		},
		{
			name: "one instance: replaced in place, even when it does not serve",
			in:   Input{Primary: "db-0", Instances: []Instance{with(old("db-0"), unready)}, Want: 1, Observed: true},
			want: Step{Delete: "db-0"},
		},
		{
			name: "one instance: waits for its new pod",
			in:   Input{Primary: "db-0", Instances: []Instance{with(fresh("db-0"), unready)}, Want: 1, Observed: true},
			want: Step{Updated: 1, Complete: true},
		},
		{
			name: "two instances: the replica, then a switchover",
			in:   Input{Primary: "db-0", Instances: []Instance{old("db-0"), fresh("db-1")}, Want: 2, Observed: true},
			want: Step{Updated: 1, SwitchoverTo: "db-1"},
		},
		{
			name: "no updated replica serves: wait",
			in:   Input{Primary: "db-0", Instances: []Instance{old("db-0"), with(fresh("db-1"), unready)}, Want: 2, Observed: true},
			want: Step{Updated: 1, Waiting: "db-1 runs the new template but does not serve yet"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Next(tc.in); got != tc.want {
				t.Errorf("Next() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

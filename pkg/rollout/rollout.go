// Package rollout decides how a database's instances move to a new pod
// template, primary last: the replicas are replaced one at a time, each
// serving its role again (a replica streaming within the lag bound) before
// the next; then the role moves to the most advanced updated replica with
// one planned switchover; then the old primary, a replica by now, is
// replaced. A database of one instance has no replica to move the role to:
// its pod is replaced, and writes wait for it.
//
// The StatefulSet updates nothing by itself (updateStrategy OnDelete): a pod
// the controller deletes comes back at the StatefulSet's update revision.
// Next is a pure function of what the controller gathered; the controller
// deletes the pod, or writes the switchover, that it names.
package rollout

import (
	"fmt"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Instance is one pod of the database as the controller saw it.
type Instance struct {
	Name string
	// Updated tells that the pod runs the StatefulSet's update revision.
	Updated bool
	// Ready tells that the instance serves the role mydb gave it: a primary
	// takes writes, a replica streams from it within the lag bound.
	Ready bool
	// Terminating tells that the pod is being deleted.
	Terminating bool
	// Position is how far the instance's data goes, as its manager just
	// reported (nil when it did not).
	Position *api.Position
}

// Input is what a step is decided from.
type Input struct {
	// Primary is the instance that holds the primary role.
	Primary string
	// Instances are the database's pods that exist, in ordinal order.
	Instances []Instance
	// Want is how many instances the database has (spec.replicas).
	Want int
	// Observed tells that the StatefulSet controller has read the current
	// template: until then no pod can tell whether it runs it.
	Observed bool
	// Busy says why the primary role must not be touched now (a switchover
	// or failover under way, a hibernation); "" when nothing is.
	Busy string
	// Broken tells that no instance has served for longer than the
	// failover delay: no failover can help, and replacing pods cannot take
	// service away. The new template may be the fix (an image that
	// exists, resources that fit), so every outdated pod is replaced, one
	// at a time, without waiting for the updated ones to serve.
	Broken bool
	// MajorUpgrade tells that the new template runs a major version of the
	// engine that cannot replicate from the old one (PostgreSQL): no
	// updated replica can serve before the primary runs the new major, so
	// none can take the role over. The replicas are replaced first without
	// waiting for them to serve (their managers keep their old data and
	// wait), then the primary (its manager upgrades the data before its
	// server starts), whose replicas then clone it.
	MajorUpgrade bool
}

// Step is what to do now: at most one of Delete and SwitchoverTo.
type Step struct {
	// Delete is the pod to delete so that it comes back updated.
	Delete string
	// SwitchoverTo is the replica to move the primary role to.
	SwitchoverTo string
	// Waiting says why nothing is done now; "" when the step acts or the
	// rollout is complete.
	Waiting string
	// Updated counts the instances that run the update revision.
	Updated int
	// Complete tells that every instance runs the update revision.
	Complete bool
}

// Next is the next step of the rollout.
func Next(in Input) Step {
	var s Step
	var primary *Instance
	for i := range in.Instances {
		inst := &in.Instances[i]
		if inst.Updated && !inst.Terminating {
			s.Updated++
		}
		if inst.Name == in.Primary {
			primary = inst
		}
	}
	switch {
	case !in.Observed:
		s.Waiting = "the StatefulSet controller has not read the new template yet"
		return s
	case s.Updated == in.Want && len(in.Instances) == in.Want:
		s.Complete = true
		return s
	case in.Busy != "":
		s.Waiting = in.Busy
		return s
	case in.Broken || in.MajorUpgrade:
		// Both replace every outdated pod, replicas first, without waiting
		// for the replaced ones to serve.
		return brokenStep(in, s)
	case in.Want == 1 && primary != nil && !primary.Updated && !primary.Terminating:
		// No replica to move the role to: the one instance is replaced,
		// whether it serves or not (its new template may be the fix).
		s.Delete = primary.Name
		return s
	case primary == nil:
		s.Waiting = fmt.Sprintf("the primary %s has no pod", in.Primary)
		return s
	case !primary.Ready:
		// Replicas are the failover's candidates while the primary is
		// down: none is touched.
		s.Waiting = fmt.Sprintf("the primary %s does not serve", in.Primary)
		return s
	}
	// A replica that does not serve, and does not run the new template,
	// holds nothing up by being replaced first.
	if victim := lastReplica(in, func(i Instance) bool { return !i.Updated && !i.Ready && !i.Terminating }); victim != "" {
		s.Delete = victim
		return s
	}
	if len(in.Instances) < in.Want {
		s.Waiting = fmt.Sprintf("%d of %d instances have a pod", len(in.Instances), in.Want)
		return s
	}
	for _, inst := range in.Instances {
		switch {
		case inst.Terminating:
			s.Waiting = fmt.Sprintf("%s is being replaced", inst.Name)
			return s
		case inst.Updated && !inst.Ready:
			s.Waiting = fmt.Sprintf("%s runs the new template but does not serve yet", inst.Name)
			return s
		}
	}
	if victim := lastReplica(in, func(i Instance) bool { return !i.Updated }); victim != "" {
		s.Delete = victim
		return s
	}
	// Only the primary is left: the most advanced updated replica takes
	// over, then the old primary is a replica like any other.
	var target string
	var best *api.Position
	for _, inst := range in.Instances {
		if inst.Name == in.Primary || !inst.Updated || !inst.Ready {
			continue
		}
		if target == "" || (inst.Position != nil && (best == nil || inst.Position.Compare(*best) > 0)) {
			target, best = inst.Name, inst.Position
		}
	}
	if target == "" {
		s.Waiting = "no updated replica serves to take over the primary role"
		return s
	}
	s.SwitchoverTo = target
	return s
}

// brokenStep replaces the outdated pods of a database where nothing
// serves, or of a major upgrade: replicas first, one pod at a time.
func brokenStep(in Input, s Step) Step {
	for _, inst := range in.Instances {
		if inst.Terminating {
			s.Waiting = fmt.Sprintf("%s is being replaced", inst.Name)
			return s
		}
	}
	if victim := lastReplica(in, func(i Instance) bool { return !i.Updated }); victim != "" {
		s.Delete = victim
		return s
	}
	for _, inst := range in.Instances {
		if inst.Name == in.Primary && !inst.Updated {
			s.Delete = inst.Name
			return s
		}
	}
	s.Waiting = fmt.Sprintf("%d of %d instances have a pod", len(in.Instances), in.Want)
	return s
}

// lastReplica is the replica of the highest ordinal that matches, the
// order in which a StatefulSet replaces pods ("" when none does).
func lastReplica(in Input, match func(Instance) bool) string {
	for i := len(in.Instances) - 1; i >= 0; i-- {
		if inst := in.Instances[i]; inst.Name != in.Primary && match(inst) {
			return inst.Name
		}
	}
	return ""
}

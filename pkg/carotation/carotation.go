// Package carotation decides the steps that replace a database's root CA
// without restarting an engine or breaking a connection: the new root is
// first trusted next to the old one everywhere, then it signs (a new
// issuer, from which every instance mints a new certificate), then the old
// root is no longer trusted. Each step waits until every instance reports
// that it took the previous one, so no peer ever meets a certificate it
// cannot verify. Next is a pure function of what the controller gathered.
package carotation

import (
	"fmt"
	"slices"
	"time"
)

// Phase is where a rotation is, as the database's CA Secret records it.
type Phase string

const (
	// Idle: one root, which signs and is trusted.
	Idle Phase = ""
	// Introducing: the next root is trusted next to the current one, which
	// still signs.
	Introducing Phase = "Introducing"
	// Switched: the new root signs (the issuer is of it); the previous one
	// is still trusted, for certificates it signed that are still in use.
	Switched Phase = "Switched"
	// Retiring is no phase of the CA Secret, which trusts the active root
	// alone again: the instances have yet to see that.
	Retiring Phase = "Retiring"
)

// Action is what the controller does next.
type Action string

const (
	None Action = ""
	// Begin makes a new root and trusts it next to the current one.
	Begin Action = "Begin"
	// Switch makes the new root the one that signs, with a new issuer.
	Switch Action = "Switch"
	// Finish stops trusting the previous root.
	Finish Action = "Finish"
)

// Instance is what one instance's manager reported of its certificates.
type Instance struct {
	Name string
	// Reported is false when the manager did not answer.
	Reported bool
	// Roots are the fingerprints of the roots it trusts; Issuer that of
	// the issuer its certificate is of.
	Roots  []string
	Issuer string
}

// Input is what Next decides from.
type Input struct {
	Now   time.Time
	Phase Phase
	// PhaseSince is when the phase began.
	PhaseSince time.Time
	// Requested is the rotation a user asked for (the rotate-CA
	// annotation's value); Handled the last one a rotation began for.
	Requested, Handled string
	// RenewAt is when the current root is due for replacement (two thirds
	// of its life).
	RenewAt time.Time
	// ActiveRoot is the fingerprint of the root that signs; NewRoot that
	// of the root being introduced (Introducing); Issuer that of the
	// issuer in the certificates Secret.
	ActiveRoot, NewRoot, Issuer string
	// MinOverlap is how long both roots are trusted before the new one
	// signs: applications that read the CA bundle get this long to read
	// the new one.
	MinOverlap time.Duration
	// Instances are the database's instance pods.
	Instances []Instance
}

// Step is Next's answer.
type Step struct {
	Action Action
	// Reason says why a rotation begins (Requested, Expiring).
	Reason string
	// Waiting says what the phase waits for.
	Waiting string
}

// Reasons a rotation begins for.
const (
	ReasonRequested = "Requested"
	ReasonExpiring  = "Expiring"
)

// Next is the step to take now.
func Next(in Input) Step {
	switch in.Phase {
	case Idle:
		// After a rotation, the managers stop trusting the previous root
		// when they see the bundle without it; the rotation ends then.
		if msg := waitFor(reported(in.Instances), func(i Instance) bool { return slices.Equal(i.Roots, []string{in.ActiveRoot}) },
			"stop trusting the previous root"); msg != "" && in.ActiveRoot != "" {
			return Step{Waiting: msg}
		}
		switch {
		case in.Requested != "" && in.Requested != in.Handled:
			return Step{Action: Begin, Reason: ReasonRequested}
		case !in.RenewAt.IsZero() && !in.Now.Before(in.RenewAt):
			return Step{Action: Begin, Reason: ReasonExpiring}
		}
		return Step{}
	case Introducing:
		if msg := waitFor(in.Instances, func(i Instance) bool { return slices.Contains(i.Roots, in.NewRoot) }, "trust the new root"); msg != "" {
			return Step{Waiting: msg}
		}
		if until := in.PhaseSince.Add(in.MinOverlap); in.Now.Before(until) {
			return Step{Waiting: fmt.Sprintf("both roots are trusted until %s, for applications to read the new CA bundle", until.UTC().Format(time.RFC3339))}
		}
		return Step{Action: Switch}
	case Switched:
		if msg := waitFor(in.Instances, func(i Instance) bool { return i.Issuer == in.Issuer }, "hold a certificate of the new root"); msg != "" {
			return Step{Waiting: msg}
		}
		return Step{Action: Finish}
	}
	return Step{}
}

// reported are the instances whose managers answered (an instance of an
// earlier mydb, which reports no certificates, does not hold the end of a
// rotation: it trusts what its pod mounted at its start).
func reported(instances []Instance) []Instance {
	return slices.DeleteFunc(slices.Clone(instances), func(i Instance) bool { return !i.Reported })
}

// waitFor says which instances have not done what (empty: all have).
func waitFor(instances []Instance, done func(Instance) bool, what string) string {
	var silent, behind []string
	for _, i := range instances {
		switch {
		case !i.Reported:
			silent = append(silent, i.Name)
		case !done(i):
			behind = append(behind, i.Name)
		}
	}
	switch {
	case len(behind) > 0:
		return fmt.Sprintf("waiting for %v to %s", behind, what)
	case len(silent) > 0:
		return fmt.Sprintf("waiting for %v to answer (they must %s)", silent, what)
	}
	return ""
}

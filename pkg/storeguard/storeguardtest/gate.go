// Package storeguardtest has a stand-in for the store guard, for the tests
// of what the guard gates (its HTTP filter, the storage wrapper).
package storeguardtest

import "context"

// Gate refuses with Refusal (nil: lets everything through), and counts the
// confirmations asked of it.
type Gate struct {
	Refusal  error
	Confirms int
}

// Err is the refusal.
func (g *Gate) Err() error { return g.Refusal }

// Confirm counts the confirmation and answers with the refusal.
func (g *Gate) Confirm(context.Context) error {
	g.Confirms++
	return g.Refusal
}

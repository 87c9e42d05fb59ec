// Package authorizing is what the admission plugins that ask the server's
// authorizer a question of their own share (may this user read the Secret
// the object names, may this user force a failover): the authorizer the
// server's initializer hands them, and one way to ask it.
package authorizing

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer is embedded by such a plugin; Plugin is the plugin's name.
type Authorizer struct {
	Plugin     string
	authorizer authorizer.Authorizer
}

// SetAuthorizer implements initializer.WantsAuthorizer.
func (a *Authorizer) SetAuthorizer(z authorizer.Authorizer) { a.authorizer = z }

// ValidateInitialization checks the plugin was given the authorizer.
func (a *Authorizer) ValidateInitialization() error {
	if a.authorizer == nil {
		return fmt.Errorf("%s needs an authorizer", a.Plugin)
	}
	return nil
}

// Allowed tells whether attrs are allowed and, when not, why ("" when the
// authorizer said nothing).
func (a *Authorizer) Allowed(ctx context.Context, attrs authorizer.Attributes) (bool, string) {
	decision, reason, err := a.authorizer.Authorize(ctx, attrs)
	switch {
	case err != nil:
		return false, err.Error()
	case decision != authorizer.DecisionAllow:
		return false, reason
	}
	return true, ""
}

package validation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/names"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of spec.databases and spec.roles: the primary's manager applies
// them all on every change, and each name must be one every engine takes.
const (
	MaxDatabases          = 100
	MaxRoles              = 100
	MaxDatabaseNameLength = 63 // PostgreSQL's NAMEDATALEN - 1; MySQL takes 64
	MaxRoleNameLength     = 32 // MySQL's user name length
	MaxConnectionLimit    = 100000
)

var (
	objectNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	characterSetRE    = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)
	collationRE       = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)
)

// reservedDatabases are the engines' own databases, mydb's and the
// application's, in any engine: a database of the spec may not be one.
var reservedDatabases = []string{
	"postgres", "template0", "template1",
	"mysql", "information_schema", "performance_schema", "sys",
	"mydb_meta", engine.ApplicationDatabase,
}

// reservedRoles are the engines' administrators, mydb's users and names
// PostgreSQL keeps for itself; reservedRolePrefixes, the prefixes of
// PostgreSQL's built-in roles, mydb's groups and its short-lived users.
var (
	reservedRoles = []string{
		"postgres", "root", "replicator", engine.ApplicationUser,
		"public", "none", "current_user", "session_user", "current_role",
	}
	reservedRolePrefixes = []string{"pg_", "mydb_", "k8s_"}
)

var (
	supportedEnsures = []string{string(example.EnsurePresent), string(example.EnsureAbsent)}
	supportedAccess  = []string{string(example.DatabaseAccessReadOnly), string(example.DatabaseAccessReadWrite), string(example.DatabaseAccessAll)}
)

// validateObjectName checks a database's or a role's name.
func validateObjectName(name string, maxLength int, reserved []string, prefixes []string, fldPath *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case len(name) > maxLength:
		return field.ErrorList{field.TooLong(fldPath, name, maxLength)}
	case !objectNamePattern.MatchString(name):
		return field.ErrorList{field.Invalid(fldPath, name, "must hold only lowercase letters, digits and underscores, and start with a letter or an underscore")}
	case slices.Contains(reserved, name):
		return field.ErrorList{field.Invalid(fldPath, name, "may not be the engine's, mydb's or the application's own")}
	}
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return field.ErrorList{field.Invalid(fldPath, name, fmt.Sprintf("may not start with %q, which the engine or mydb keeps for itself", p))}
		}
	}
	return nil
}

// validateRolesAndDatabases checks spec.databases and spec.roles: names
// every engine takes, owners and privileges that name what the spec keeps.
func validateRolesAndDatabases(db string, spec *example.MyDatabaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	dbPath, rolePath := fldPath.Child("databases"), fldPath.Child("roles")
	if len(spec.Databases) > MaxDatabases {
		allErrs = append(allErrs, field.TooMany(dbPath, len(spec.Databases), MaxDatabases))
	}
	if len(spec.Roles) > MaxRoles {
		allErrs = append(allErrs, field.TooMany(rolePath, len(spec.Roles), MaxRoles))
	}
	presentRoles := map[string]bool{}
	seenRoles := map[string]bool{}
	for i, r := range spec.Roles {
		p := rolePath.Index(i)
		allErrs = append(allErrs, validateObjectName(r.Name, MaxRoleNameLength, reservedRoles, reservedRolePrefixes, p.Child("name"))...)
		if seenRoles[r.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), r.Name))
		}
		seenRoles[r.Name] = true
		if !slices.Contains(supportedEnsures, string(r.Ensure)) {
			allErrs = append(allErrs, field.NotSupported(p.Child("ensure"), r.Ensure, supportedEnsures))
		}
		if r.Ensure == example.EnsurePresent {
			presentRoles[r.Name] = true
		}
	}
	presentDatabases := map[string]bool{engine.ApplicationDatabase: true}
	seenDatabases := map[string]bool{}
	for i, d := range spec.Databases {
		p := dbPath.Index(i)
		allErrs = append(allErrs, validateObjectName(d.Name, MaxDatabaseNameLength, reservedDatabases, nil, p.Child("name"))...)
		if seenDatabases[d.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), d.Name))
		}
		seenDatabases[d.Name] = true
		if !slices.Contains(supportedEnsures, string(d.Ensure)) {
			allErrs = append(allErrs, field.NotSupported(p.Child("ensure"), d.Ensure, supportedEnsures))
		}
		if d.Ensure == example.EnsurePresent {
			presentDatabases[d.Name] = true
			if d.Owner != "" && !presentRoles[d.Owner] {
				allErrs = append(allErrs, field.Invalid(p.Child("owner"), d.Owner, "must be a role of spec.roles whose ensure is Present, or empty for the application user"))
			}
		}
		if d.CharacterSet != "" && !characterSetRE.MatchString(d.CharacterSet) {
			allErrs = append(allErrs, field.Invalid(p.Child("characterSet"), d.CharacterSet, "must be a character set's name: letters, digits and underscores, at most 32"))
		}
		if d.Collation != "" && !collationRE.MatchString(d.Collation) {
			allErrs = append(allErrs, field.Invalid(p.Child("collation"), d.Collation, "must be a collation's or locale's name: letters, digits, '_', '.', '@' and '-', at most 64"))
		}
	}
	ownSecrets := []string{names.Secret(db), names.InstanceSecret(db), names.CASecret(db), names.CertificatesSecret(db), names.CABundleSecret(db), names.CASecretCopy(db)}
	for i, r := range spec.Roles {
		p := rolePath.Index(i)
		if r.Ensure != example.EnsurePresent {
			continue
		}
		if s := r.PasswordSecret; s == nil {
			allErrs = append(allErrs, field.Required(p.Child("passwordSecret"), "must name the Secret that holds the role's password"))
		} else {
			for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(s.Name, false) {
				allErrs = append(allErrs, field.Invalid(p.Child("passwordSecret", "name"), s.Name, msg))
			}
			if slices.Contains(ownSecrets, s.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("passwordSecret", "name"), s.Name, "may not be one of the database's own Secrets, which mydb makes"))
			}
			for _, msg := range validation.IsConfigMapKey(s.Key) {
				allErrs = append(allErrs, field.Invalid(p.Child("passwordSecret", "key"), s.Key, msg))
			}
		}
		if l := r.ConnectionLimit; l != nil && (*l < 1 || *l > MaxConnectionLimit) {
			allErrs = append(allErrs, field.Invalid(p.Child("connectionLimit"), *l, fmt.Sprintf("must be between 1 and %d", MaxConnectionLimit)))
		}
		seen := map[string]bool{}
		for j, priv := range r.Privileges {
			pp := p.Child("privileges").Index(j)
			switch {
			case seen[priv.Database]:
				allErrs = append(allErrs, field.Duplicate(pp.Child("database"), priv.Database))
			case !presentDatabases[priv.Database]:
				allErrs = append(allErrs, field.Invalid(pp.Child("database"), priv.Database,
					fmt.Sprintf("must be the application's database (%q) or one of spec.databases whose ensure is Present", engine.ApplicationDatabase)))
			}
			seen[priv.Database] = true
			if !slices.Contains(supportedAccess, string(priv.Access)) {
				allErrs = append(allErrs, field.NotSupported(pp.Child("access"), priv.Access, supportedAccess))
			}
		}
	}
	return allErrs
}

// validateRolesAndDatabasesUpdate refuses a change of a database's
// character set or collation: the engine keeps those it was made with.
func validateRolesAndDatabasesUpdate(spec, old *example.MyDatabaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	before := map[string]example.DatabaseSpec{}
	for _, d := range old.Databases {
		before[d.Name] = d
	}
	for i, d := range spec.Databases {
		o, ok := before[d.Name]
		if !ok || o.Ensure != example.EnsurePresent || d.Ensure != example.EnsurePresent {
			continue
		}
		p := fldPath.Child("databases").Index(i)
		if d.CharacterSet != o.CharacterSet {
			allErrs = append(allErrs, field.Invalid(p.Child("characterSet"), d.CharacterSet, fmt.Sprintf("may not change (it was %q): the database keeps the one it was made with", o.CharacterSet)))
		}
		if d.Collation != o.Collation {
			allErrs = append(allErrs, field.Invalid(p.Child("collation"), d.Collation, fmt.Sprintf("may not change (it was %q): the database keeps the one it was made with", o.Collation)))
		}
	}
	return allErrs
}

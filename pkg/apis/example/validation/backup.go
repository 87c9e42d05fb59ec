package validation

import (
	"path"
	"slices"
	"strings"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxBackupNameLength leaves room for the "backup-" prefix of the backup's
// Job within the 63 characters of a label value.
const MaxBackupNameLength = 56

var backupPhases = []string{
	string(example.BackupPhasePending), string(example.BackupPhaseRunning),
	string(example.BackupPhaseSucceeded), string(example.BackupPhaseFailed),
}

// ValidateBackupName checks a backup's name: its Job is named after it.
func ValidateBackupName(name string, prefix bool) []string {
	errs := apimachineryvalidation.NameIsDNSLabel(name, prefix)
	if len(name) > MaxBackupNameLength {
		errs = append(errs, validation.MaxLenError(MaxBackupNameLength))
	}
	return errs
}

// ValidateMyDatabaseBackup checks a backup on create.
func ValidateMyDatabaseBackup(b *example.MyDatabaseBackup) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&b.ObjectMeta, true, ValidateBackupName, field.NewPath("metadata"))
	dbPath := field.NewPath("spec", "databaseName")
	if b.Spec.DatabaseName == "" {
		allErrs = append(allErrs, field.Required(dbPath, "must name the MyDatabase to back up"))
	} else {
		for _, msg := range ValidateMyDatabaseName(b.Spec.DatabaseName, false) {
			allErrs = append(allErrs, field.Invalid(dbPath, b.Spec.DatabaseName, msg))
		}
	}
	return allErrs
}

// ValidateMyDatabaseBackupUpdate checks an update: a backup's spec may not change.
func ValidateMyDatabaseBackupUpdate(b, old *example.MyDatabaseBackup) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(b.Spec, old.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMyDatabaseBackupStatusUpdate checks an update through /status.
func ValidateMyDatabaseBackupStatusUpdate(b, old *example.MyDatabaseBackup) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	statusPath := field.NewPath("status")
	s := b.Status
	if s.Phase != "" && !slices.Contains(backupPhases, string(s.Phase)) {
		allErrs = append(allErrs, field.NotSupported(statusPath.Child("phase"), s.Phase, backupPhases))
	}
	if s.StartTime != nil && s.CompletionTime != nil && s.CompletionTime.Before(s.StartTime) {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("completionTime"), s.CompletionTime, "may not be before status.startTime"))
	}
	allErrs = append(allErrs, validateLocation(s.Location, statusPath.Child("location"))...)
	if old.Status.Phase == example.BackupPhaseSucceeded && s.Phase != example.BackupPhaseSucceeded {
		allErrs = append(allErrs, field.Forbidden(statusPath.Child("phase"), "may not change once the backup succeeded"))
	}
	return allErrs
}

// validateLocation checks that a location names exactly one place, and a
// volume's file within its volume.
func validateLocation(l *example.BackupLocation, fldPath *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	if l.Volume == nil {
		return field.ErrorList{field.Required(fldPath.Child("volume"), "must name where the dump is")}
	}
	var allErrs field.ErrorList
	volPath := fldPath.Child("volume")
	for _, msg := range validation.IsDNS1123Subdomain(l.Volume.ClaimName) {
		allErrs = append(allErrs, field.Invalid(volPath.Child("claimName"), l.Volume.ClaimName, msg))
	}
	p := l.Volume.Path
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		allErrs = append(allErrs, field.Invalid(volPath.Child("path"), p, "must be a clean relative path within the volume"))
	}
	return allErrs
}

package validation

import (
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxBackupNameLength is a DNS label's.
const MaxBackupNameLength = validation.DNS1123LabelMaxLength

var backupTargets = []string{string(example.BackupTargetPrimary), string(example.BackupTargetPreferReplica)}

var backupPhases = []string{
	string(example.BackupPhasePending), string(example.BackupPhaseRunning),
	string(example.BackupPhaseSucceeded), string(example.BackupPhaseFailed),
}

// ValidateBackupName checks a backup's name: a DNS label, as it is part of
// its object key.
func ValidateBackupName(name string, prefix bool) []string {
	return apimachineryvalidation.NameIsDNSLabel(name, prefix)
}

// ValidateMyDatabaseBackup checks a backup on create.
func ValidateMyDatabaseBackup(b *example.MyDatabaseBackup) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&b.ObjectMeta, true, ValidateBackupName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMetadataTimes(&b.ObjectMeta, field.NewPath("metadata"))...)
	dbPath := field.NewPath("spec", "databaseName")
	if b.Spec.DatabaseName == "" {
		allErrs = append(allErrs, field.Required(dbPath, "must name the MyDatabase to back up"))
	} else {
		for _, msg := range ValidateMyDatabaseName(b.Spec.DatabaseName, false) {
			allErrs = append(allErrs, field.Invalid(dbPath, b.Spec.DatabaseName, msg))
		}
	}
	if !slices.Contains(backupTargets, string(b.Spec.Target)) {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("spec", "target"), b.Spec.Target, backupTargets))
	}
	return allErrs
}

// ValidateMyDatabaseBackupUpdate checks an update: a backup's spec may not change.
func ValidateMyDatabaseBackupUpdate(b, old *example.MyDatabaseBackup) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMetadataTimes(&b.ObjectMeta, field.NewPath("metadata"))...)
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
	allErrs = append(allErrs, validateTimePtr(s.StartTime, statusPath.Child("startTime"))...)
	allErrs = append(allErrs, validateTimePtr(s.CompletionTime, statusPath.Child("completionTime"))...)
	if s.StartTime != nil && s.CompletionTime != nil && s.CompletionTime.Before(s.StartTime) {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("completionTime"), s.CompletionTime, "may not be before status.startTime"))
	}
	allErrs = append(allErrs, validateLocation(s.Location, statusPath.Child("location"))...)
	if s.Bytes < 0 {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("bytes"), s.Bytes, "may not be negative"))
	}
	if s.SizeBytes < 0 {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("sizeBytes"), s.SizeBytes, "may not be negative"))
	}
	if s.Checksum != "" && !sha256Hex.MatchString(s.Checksum) {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("checksum"), s.Checksum, "must be a SHA-256 in lowercase hex (64 characters)"))
	}
	if s.Role != "" && s.Role != example.InstanceRolePrimary && s.Role != example.InstanceRoleReplica {
		allErrs = append(allErrs, field.NotSupported(statusPath.Child("role"), s.Role, []string{string(example.InstanceRolePrimary), string(example.InstanceRoleReplica)}))
	}
	if s.Instance != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.Instance) {
			allErrs = append(allErrs, field.Invalid(statusPath.Child("instance"), s.Instance, msg))
		}
	}
	if len(s.Format) > 63 {
		allErrs = append(allErrs, field.TooLong(statusPath.Child("format"), "", 63))
	}
	if p := s.Position; p != nil && (len(p.LSN) > example.MaxPositionLength || len(p.GTID) > example.MaxPositionLength) {
		allErrs = append(allErrs, field.TooLong(statusPath.Child("position"), "", example.MaxPositionLength))
	}
	if old.Status.Phase == example.BackupPhaseSucceeded && s.Phase != example.BackupPhaseSucceeded {
		allErrs = append(allErrs, field.Forbidden(statusPath.Child("phase"), "may not change once the backup succeeded"))
	}
	return allErrs
}

// validateLocation checks that a location names one object of a bucket,
// and the Secret that reads it.
func validateLocation(l *example.BackupLocation, fldPath *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	switch {
	case l.S3 == nil && l.Volume == nil:
		return field.ErrorList{field.Required(fldPath, "must name where the dump is: exactly one of s3 and volume")}
	case l.S3 != nil && l.Volume != nil:
		return field.ErrorList{field.Forbidden(fldPath.Child("volume"), "may not be set with s3: a dump is in one place")}
	case l.Volume != nil:
		p := fldPath.Child("volume", "claimName")
		if l.Volume.ClaimName == "" {
			return field.ErrorList{field.Required(p, "must name the claim holding the dump")}
		}
		var allErrs field.ErrorList
		for _, msg := range validation.IsDNS1123Subdomain(l.Volume.ClaimName) {
			allErrs = append(allErrs, field.Invalid(p, l.Volume.ClaimName, msg))
		}
		return allErrs
	}
	p := fldPath.Child("s3")
	allErrs := validateEndpoint(l.S3.Endpoint, p.Child("endpoint"))
	allErrs = append(allErrs, validateBucket(l.S3.Bucket, p.Child("bucket"))...)
	if l.S3.Key == "" {
		allErrs = append(allErrs, field.Required(p.Child("key"), "must name the dump's object"))
	} else {
		allErrs = append(allErrs, validateObjectPath(l.S3.Key, p.Child("key"))...)
	}
	allErrs = append(allErrs, validateCredentialsSecret(&l.S3.CredentialsSecret, p.Child("credentialsSecret"))...)
	allErrs = append(allErrs, validateCABundle(l.S3.CABundle, p.Child("caBundle"))...)
	return allErrs
}

// validateDestination checks a database's backup destination.
func validateDestination(d *example.BackupDestination, fldPath *field.Path) field.ErrorList {
	switch {
	case d.S3 == nil && d.Volume == nil:
		return field.ErrorList{field.Required(fldPath, "must name where backups are written: exactly one of s3 and volume")}
	case d.S3 != nil && d.Volume != nil:
		return field.ErrorList{field.Forbidden(fldPath.Child("volume"), "may not be set with s3: exactly one of s3 and volume")}
	case d.Volume != nil:
		return validateVolumeDestination(d.Volume, fldPath.Child("volume"))
	}
	p := fldPath.Child("s3")
	allErrs := validateEndpoint(d.S3.Endpoint, p.Child("endpoint"))
	allErrs = append(allErrs, validateBucket(d.S3.Bucket, p.Child("bucket"))...)
	if len(d.S3.Region) > 63 {
		allErrs = append(allErrs, field.TooLong(p.Child("region"), "", 63))
	}
	if d.S3.Prefix != "" {
		allErrs = append(allErrs, validateObjectPath(d.S3.Prefix, p.Child("prefix"))...)
	}
	allErrs = append(allErrs, validateCredentialsSecret(&d.S3.CredentialsSecret, p.Child("credentialsSecret"))...)
	allErrs = append(allErrs, validateCABundle(d.S3.CABundle, p.Child("caBundle"))...)
	return allErrs
}

// validateVolumeDestination checks the class and size of the backups' claims.
func validateVolumeDestination(v *example.VolumeDestination, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if v.StorageClassName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*v.StorageClassName) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("storageClassName"), *v.StorageClassName, msg))
		}
	}
	if v.StorageSize != nil {
		allErrs = append(allErrs, validateStorageSize(*v.StorageSize, fldPath.Child("storageSize"))...)
	}
	return allErrs
}

// maxObjectPathLength leaves room, within S3's 1024 bytes of a key, for
// the namespace, database, UIDs and backup name after a prefix.
const maxObjectPathLength = 512

// validateEndpoint checks an object store's URL: http or https, a host,
// and nothing else (a path would be taken for the bucket by some clients;
// credentials belong in the Secret).
func validateEndpoint(endpoint string, fldPath *field.Path) field.ErrorList {
	if endpoint == "" {
		return field.ErrorList{field.Required(fldPath, "must be the object store's URL, such as https://s3.example.com")}
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(fldPath, endpoint, "must be a URL: "+err.Error())}
	case u.Scheme != "http" && u.Scheme != "https":
		return field.ErrorList{field.Invalid(fldPath, endpoint, "must have the scheme http or https")}
	case u.Hostname() == "":
		return field.ErrorList{field.Invalid(fldPath, endpoint, "must have a host")}
	case u.User != nil:
		return field.ErrorList{field.Invalid(fldPath, endpoint, "may not hold credentials: name them in credentialsSecret")}
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return field.ErrorList{field.Invalid(fldPath, endpoint, "may not have a path, a query or a fragment")}
	}
	return nil
}

// validateBucket checks S3's bucket naming rules.
func validateBucket(bucket string, fldPath *field.Path) field.ErrorList {
	switch {
	case bucket == "":
		return field.ErrorList{field.Required(fldPath, "must name the bucket")}
	case len(bucket) < 3 || len(bucket) > 63:
		return field.ErrorList{field.Invalid(fldPath, bucket, "must be 3 to 63 characters long")}
	case !bucketName.MatchString(bucket):
		return field.ErrorList{field.Invalid(fldPath, bucket, "must consist of lowercase letters, digits, '.' and '-', and begin and end with a letter or digit")}
	case strings.Contains(bucket, ".."):
		return field.ErrorList{field.Invalid(fldPath, bucket, "may not contain two dots in a row")}
	case net.ParseIP(bucket) != nil:
		return field.ErrorList{field.Invalid(fldPath, bucket, "may not be an IP address")}
	}
	return nil
}

var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// validateObjectPath checks a prefix or key: clean, relative, printable,
// with no "." or ".." element, so that the keys of two databases can never
// name the same object.
func validateObjectPath(p string, fldPath *field.Path) field.ErrorList {
	switch {
	case len(p) > maxObjectPathLength:
		return field.ErrorList{field.TooLong(fldPath, "", maxObjectPathLength)}
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || path.Clean(p) != p || p == "." ||
		slices.Contains(strings.Split(p, "/"), ".."):
		return field.ErrorList{field.Invalid(fldPath, p, "must be a clean relative path, such as prod/databases, with no leading or trailing '/' and no '.' or '..' element")}
	case strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) >= 0:
		return field.ErrorList{field.Invalid(fldPath, p, "may not contain control characters or '\\'")}
	}
	return nil
}

func validateCredentialsSecret(s *example.S3CredentialsSecret, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if s.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "must name the Secret holding the access key"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
		if s.Name != "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), s.Name, msg))
		}
	}
	allErrs = append(allErrs, validateKey(s.AccessKeyIDKey, fldPath.Child("accessKeyIDKey"))...)
	allErrs = append(allErrs, validateKey(s.SecretAccessKeyKey, fldPath.Child("secretAccessKeyKey"))...)
	return allErrs
}

func validateCABundle(c *example.CABundleSource, fldPath *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch {
	case (c.SecretName == "") == (c.ConfigMapName == ""):
		allErrs = append(allErrs, field.Invalid(fldPath, "", "must set exactly one of secretName and configMapName"))
	case c.SecretName != "":
		for _, msg := range validation.IsDNS1123Subdomain(c.SecretName) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("secretName"), c.SecretName, msg))
		}
	default:
		for _, msg := range validation.IsDNS1123Subdomain(c.ConfigMapName) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("configMapName"), c.ConfigMapName, msg))
		}
	}
	return append(allErrs, validateKey(c.Key, fldPath.Child("key"))...)
}

func validateKey(key string, fldPath *field.Path) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(fldPath, "must name a key")}
	}
	var allErrs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(key) {
		allErrs = append(allErrs, field.Invalid(fldPath, key, msg))
	}
	return allErrs
}

// Package fuzzer holds fuzz functions for the example.com API group that
// respect its defaults, so round trips through a versioned type are lossless.
package fuzzer

import (
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"
)

// Funcs returns the fuzz functions of the example.com API group.
var Funcs = func(codecs runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(s *example.MyDatabaseSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			// Defaulting fills in whatever is empty, so an empty value could
			// not survive a round trip through v1.
			if s.Version == "" {
				s.Version = "8.4"
			}
			if s.DeletionPolicy == "" {
				s.DeletionPolicy = example.DeletionPolicyRetain
			}
			if s.Backup != nil && s.Backup.Retention == 0 {
				s.Backup.Retention = 7
			}
			if s.Backup != nil && s.Backup.PointInTimeRecovery != nil && s.Backup.PointInTimeRecovery.ArchiveTimeout == nil {
				s.Backup.PointInTimeRecovery.ArchiveTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			}
			if s.FailoverDelay == nil {
				s.FailoverDelay = &metav1.Duration{Duration: 30 * time.Second}
			}
			if s.Replication == nil {
				s.Replication = &example.ReplicationSpec{}
			}
			if s.Replication.Mode == "" {
				s.Replication.Mode = example.ReplicationModeAsync
			}
			s.Resources.Requests = withComputeResources(s.Resources.Requests, c)
			s.Resources.Limits = withComputeResources(s.Resources.Limits, c)
		},
		func(d *example.DatabaseSpec, c randfill.Continue) {
			c.FillNoCustom(d)
			if d.Ensure == "" {
				d.Ensure = example.EnsurePresent
			}
		},
		func(r *example.RoleSpec, c randfill.Continue) {
			c.FillNoCustom(r)
			if r.Ensure == "" {
				r.Ensure = example.EnsurePresent
			}
		},
		func(s *example.SecretKeySelector, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Key == "" {
				s.Key = "password"
			}
		},
		func(s *example.MyDatabaseBackupSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Target == "" {
				s.Target = example.BackupTargetPreferReplica
			}
		},
		func(s *example.S3CredentialsSecret, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.AccessKeyIDKey == "" {
				s.AccessKeyIDKey = "accessKeyID"
			}
			if s.SecretAccessKeyKey == "" {
				s.SecretAccessKeyKey = "secretAccessKey"
			}
		},
		func(s *example.CABundleSource, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Key == "" {
				s.Key = "ca.crt"
			}
		},
	}
}

func withComputeResources(list corev1.ResourceList, c randfill.Continue) corev1.ResourceList {
	if list == nil {
		list = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := list[name]; !ok {
			list[name] = *resource.NewQuantity(c.Int63n(1<<40), resource.DecimalSI)
		}
	}
	return list
}

// Package s3location is where the controllers put a backup in an S3
// bucket, and how they reach it: the object's key and location, the
// credentials an instance manager needs for it (read from the user's
// Secret when needed), and mydb's own object store client's view of it.
package s3location

import (
	"context"
	"fmt"
	"path"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ObjectKey is where a backup of db is written in its destination:
// <prefix>/<namespace>/<database>/<database UID>/<backup>-<backup UID>.
// The UIDs keep apart the backups of a database deleted and created again
// under its name, and two backups of one name created one after the other.
func ObjectKey(d *examplev1.S3Destination, db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) string {
	return path.Join(d.Prefix, db.Namespace, db.Name, string(db.UID), b.Name+"-"+string(b.UID))
}

// Of is where the backup b of db goes: the destination's bucket and
// credentials, and the backup's key.
func Of(d *examplev1.S3Destination, db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) *examplev1.BackupLocation {
	return &examplev1.BackupLocation{S3: &examplev1.S3Location{
		Endpoint: d.Endpoint, Region: d.Region, Bucket: d.Bucket, Key: ObjectKey(d, db, b),
		CredentialsSecret: d.CredentialsSecret, CABundle: d.CABundle.DeepCopy(),
	}}
}

// Object reads the access key (and the CA bundle) of a location from the
// namespace: what an instance manager needs to write or read the object.
// The Secret is read when it is needed, not watched: it is the user's, and
// carries none of mydb's labels.
func Object(ctx context.Context, kube kubernetes.Interface, namespace string, l *examplev1.S3Location) (*api.S3Object, error) {
	ref := l.CredentialsSecret
	secret, err := kube.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the credentials Secret %q: %w", ref.Name, err)
	}
	id, secretKey := secret.Data[ref.AccessKeyIDKey], secret.Data[ref.SecretAccessKeyKey]
	if len(id) == 0 || len(secretKey) == 0 {
		return nil, fmt.Errorf("the credentials Secret %q must hold the keys %q and %q", ref.Name, ref.AccessKeyIDKey, ref.SecretAccessKeyKey)
	}
	o := &api.S3Object{
		Endpoint: l.Endpoint, Region: l.Region, Bucket: l.Bucket, Key: l.Key,
		AccessKeyID: string(id), SecretAccessKey: string(secretKey),
	}
	if ca := l.CABundle; ca != nil {
		switch {
		case ca.SecretName != "":
			s, err := kube.CoreV1().Secrets(namespace).Get(ctx, ca.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading the CA bundle Secret %q: %w", ca.SecretName, err)
			}
			o.CABundle = s.Data[ca.Key]
		default:
			cm, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, ca.ConfigMapName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading the CA bundle ConfigMap %q: %w", ca.ConfigMapName, err)
			}
			o.CABundle = []byte(cm.Data[ca.Key])
		}
		if len(o.CABundle) == 0 {
			return nil, fmt.Errorf("the CA bundle has no key %q", ca.Key)
		}
	}
	return o, nil
}

// StoreConfig is the object store client's view of an object's bucket.
func StoreConfig(o *api.S3Object) objectstore.Config {
	return objectstore.Config{
		Endpoint: o.Endpoint, Region: o.Region, Bucket: o.Bucket,
		AccessKeyID: o.AccessKeyID, SecretAccessKey: o.SecretAccessKey, CABundle: o.CABundle,
	}
}

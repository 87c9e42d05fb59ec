package v1

// Written by hand, not generated: client-gen's expansion interface for
// methods its tags cannot make. A +genclient:method=Backup tag on MyDatabase
// would do, but applyconfiguration-gen then also writes
// ExtractMyDatabaseBackup (MyDatabase's fields owned through the backup
// subresource), which collides with the extract function of the
// MyDatabaseBackup kind and does not compile.

import (
	"context"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	scheme "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MyDatabaseExpansion has the MyDatabase methods client-gen does not generate.
type MyDatabaseExpansion interface {
	// Backup backs up the MyDatabase called myDatabaseName now: it POSTs
	// myDatabaseBackup (all of it optional: a name or generateName, labels)
	// to mydatabases/<name>/backup and returns the MyDatabaseBackup the
	// server created.
	Backup(ctx context.Context, myDatabaseName string, myDatabaseBackup *examplev1.MyDatabaseBackup, opts metav1.CreateOptions) (*examplev1.MyDatabaseBackup, error)
	// Switchover POSTs myDatabaseSwitchover (its spec.targetInstance, or
	// empty for any ready replica) to mydatabases/<name>/switchover and
	// returns the server's answer: the old and the new primary.
	Switchover(ctx context.Context, myDatabaseName string, myDatabaseSwitchover *examplev1.MyDatabaseSwitchover, opts metav1.CreateOptions) (*examplev1.MyDatabaseSwitchover, error)
	// CreateCredentials POSTs myDatabaseCredentialRequest (a role and a
	// lifetime) to mydatabases/<name>/credentials and returns the
	// short-lived database user the server made.
	CreateCredentials(ctx context.Context, myDatabaseName string, myDatabaseCredentialRequest *examplev1.MyDatabaseCredentialRequest, opts metav1.CreateOptions) (*examplev1.MyDatabaseCredentialRequest, error)
}

// Backup is what client-gen generates for
// +genclient:method=Backup,verb=create,subresource=backup,input=MyDatabaseBackup,result=MyDatabaseBackup.
func (c *myDatabases) Backup(ctx context.Context, myDatabaseName string, myDatabaseBackup *examplev1.MyDatabaseBackup, opts metav1.CreateOptions) (result *examplev1.MyDatabaseBackup, err error) {
	result = &examplev1.MyDatabaseBackup{}
	err = c.GetClient().Post().
		Namespace(c.GetNamespace()).
		Resource("mydatabases").
		Name(myDatabaseName).
		SubResource("backup").
		VersionedParams(&opts, scheme.ParameterCodec).
		Body(myDatabaseBackup).
		Do(ctx).
		Into(result)
	return
}

// Switchover is what client-gen generates for
// +genclient:method=Switchover,verb=create,subresource=switchover,input=MyDatabaseSwitchover,result=MyDatabaseSwitchover.
func (c *myDatabases) Switchover(ctx context.Context, myDatabaseName string, myDatabaseSwitchover *examplev1.MyDatabaseSwitchover, opts metav1.CreateOptions) (result *examplev1.MyDatabaseSwitchover, err error) {
	result = &examplev1.MyDatabaseSwitchover{}
	err = c.GetClient().Post().
		Namespace(c.GetNamespace()).
		Resource("mydatabases").
		Name(myDatabaseName).
		SubResource("switchover").
		VersionedParams(&opts, scheme.ParameterCodec).
		Body(myDatabaseSwitchover).
		Do(ctx).
		Into(result)
	return
}

// CreateCredentials is what client-gen generates for
// +genclient:method=CreateCredentials,verb=create,subresource=credentials,input=MyDatabaseCredentialRequest,result=MyDatabaseCredentialRequest.
func (c *myDatabases) CreateCredentials(ctx context.Context, myDatabaseName string, myDatabaseCredentialRequest *examplev1.MyDatabaseCredentialRequest, opts metav1.CreateOptions) (result *examplev1.MyDatabaseCredentialRequest, err error) {
	result = &examplev1.MyDatabaseCredentialRequest{}
	err = c.GetClient().Post().
		Namespace(c.GetNamespace()).
		Resource("mydatabases").
		Name(myDatabaseName).
		SubResource("credentials").
		VersionedParams(&opts, scheme.ParameterCodec).
		Body(myDatabaseCredentialRequest).
		Do(ctx).
		Into(result)
	return
}

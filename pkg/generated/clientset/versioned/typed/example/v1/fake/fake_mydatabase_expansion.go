package fake

// Written by hand, with ../mydatabase_expansion.go.

import (
	"context"

	v1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testing "k8s.io/client-go/testing"
)

// Backup records a create of the backup subresource, as client-gen's fakes
// do for a create subresource method.
func (c *fakeMyDatabases) Backup(ctx context.Context, myDatabaseName string, myDatabaseBackup *v1.MyDatabaseBackup, opts metav1.CreateOptions) (result *v1.MyDatabaseBackup, err error) {
	emptyResult := &v1.MyDatabaseBackup{}
	obj, err := c.Fake.
		Invokes(testing.NewCreateSubresourceActionWithOptions(c.Resource(), myDatabaseName, "backup", c.Namespace(), myDatabaseBackup, opts), emptyResult)
	if obj == nil {
		return emptyResult, err
	}
	return obj.(*v1.MyDatabaseBackup), err
}

// Switchover records a create of the switchover subresource.
func (c *fakeMyDatabases) Switchover(ctx context.Context, myDatabaseName string, myDatabaseSwitchover *v1.MyDatabaseSwitchover, opts metav1.CreateOptions) (result *v1.MyDatabaseSwitchover, err error) {
	emptyResult := &v1.MyDatabaseSwitchover{}
	obj, err := c.Fake.
		Invokes(testing.NewCreateSubresourceActionWithOptions(c.Resource(), myDatabaseName, "switchover", c.Namespace(), myDatabaseSwitchover, opts), emptyResult)
	if obj == nil {
		return emptyResult, err
	}
	return obj.(*v1.MyDatabaseSwitchover), err
}

// CreateCredentials records a create of the credentials subresource.
func (c *fakeMyDatabases) CreateCredentials(ctx context.Context, myDatabaseName string, myDatabaseCredentialRequest *v1.MyDatabaseCredentialRequest, opts metav1.CreateOptions) (result *v1.MyDatabaseCredentialRequest, err error) {
	emptyResult := &v1.MyDatabaseCredentialRequest{}
	obj, err := c.Fake.
		Invokes(testing.NewCreateSubresourceActionWithOptions(c.Resource(), myDatabaseName, "credentials", c.Namespace(), myDatabaseCredentialRequest, opts), emptyResult)
	if obj == nil {
		return emptyResult, err
	}
	return obj.(*v1.MyDatabaseCredentialRequest), err
}

package common

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RowFunc returns the cells of one object's row after NAME; age is the
// object's age, for the column that shows it.
type RowFunc func(obj runtime.Object, age string) ([]interface{}, error)

// ConvertToTable prints obj (one object or a list) as a Table with columns,
// the first of which is the object's name.
func ConvertToTable(obj runtime.Object, tableOptions runtime.Object, columns []metav1.TableColumnDefinition, row RowFunc) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = columns
	}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	var err error
	table.Rows, err = metatable.MetaToTableRow(obj, func(obj runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		cells, err := row(obj, age)
		return append([]interface{}{name}, cells...), err
	})
	return table, err
}

// NameColumn and AgeColumn are the standard columns.
var (
	NameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	AgeColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
)

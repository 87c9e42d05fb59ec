// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/mydb-dev/mydb/pkg/apis/example
// +k8s:defaulter-gen=TypeMeta
// +k8s:protobuf-gen=package
// +groupName=example.com
// +k8s:openapi-model-package=com.github.mydb-dev.mydb.pkg.apis.example.v1

// Package v1 is the v1 version of the example.com API: MyDatabase, a
// database run by mydb.
package v1

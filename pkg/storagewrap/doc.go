// Package storagewrap holds mydb's wrappers of k8s.io/apiserver's storage:
// what it adds below the generic registry, between genericregistry.Store
// and etcd, through the RESTOptionsGetter the registry is built with.
package storagewrap

//go:build tools

// Package tools pins the control-plane binaries that hack/build-tools.sh
// builds for local-up and the end-to-end suite (etcdutl restores mydb's etcd
// from a snapshot in the storage guard's e2e test; kubelet and kube-proxy
// make the real node of hack/local-up.sh).
package tools

import (
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)

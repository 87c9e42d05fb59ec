//go:build tools

// Package tools pins kwok, which fakes nodes and pods for the local control
// plane. It lives in its own module because kwok pins its own Kubernetes
// libraries.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"

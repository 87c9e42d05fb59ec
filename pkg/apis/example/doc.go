// +k8s:deepcopy-gen=package
// +groupName=example.com

// Package example is the internal version of the example.com API group: the
// hub every versioned type converts through.
package example

// Package scope is where one mydb serves databases: every namespace, or a
// list of them. With a list, mydb's Secret permissions can be Roles in
// those namespaces (artifacts/namespaced): its controllers read Secrets
// through one informer per namespace, never a list of the whole cluster.
package scope

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Namespaces are the namespaces one mydb serves; empty serves every one.
type Namespaces []string

// Serves tells whether mydb manages databases in namespace.
func (n Namespaces) Serves(namespace string) bool {
	return len(n) == 0 || slices.Contains(n, namespace)
}

// Validate checks that each is a namespace name, given once.
func (n Namespaces) Validate() []error {
	var errs []error
	for i, ns := range n {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, fmt.Errorf("--database-namespaces: %q: %s", ns, msg))
		}
		if slices.Contains(n[:i], ns) {
			errs = append(errs, fmt.Errorf("--database-namespaces: %q is given twice", ns))
		}
	}
	return errs
}

// NotServed is the error for a namespace mydb does not serve.
func NotServed(namespace string) error {
	return fmt.Errorf("this mydb serves databases only in the namespaces of its --database-namespaces; %q is not one of them", namespace)
}

// SecretInformer feeds the controllers' Secret lister.
type SecretInformer interface {
	// Informers are one of every namespace, or one per served namespace.
	Informers() []cache.SharedIndexInformer
	Lister() corelisters.SecretLister
}

// AllNamespaces reads Secrets through one informer of the whole cluster.
func AllNamespaces(inf coreinformers.SecretInformer) SecretInformer {
	return allNamespaces{inf}
}

type allNamespaces struct{ coreinformers.SecretInformer }

func (a allNamespaces) Informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{a.Informer()}
}

// PerNamespace reads the Secrets of each served namespace through its own
// informer; a read in any other namespace is refused, never a cluster-wide
// request.
func PerNamespace(byNamespace map[string]coreinformers.SecretInformer) SecretInformer {
	return perNamespace(byNamespace)
}

type perNamespace map[string]coreinformers.SecretInformer

func (p perNamespace) Informers() []cache.SharedIndexInformer {
	infs := make([]cache.SharedIndexInformer, 0, len(p))
	for _, ns := range p.namespaces() {
		infs = append(infs, p[ns].Informer())
	}
	return infs
}

func (p perNamespace) namespaces() []string {
	nss := make([]string, 0, len(p))
	for ns := range p {
		nss = append(nss, ns)
	}
	slices.Sort(nss)
	return nss
}

func (p perNamespace) Lister() corelisters.SecretLister { return p }

// List lists the Secrets of every served namespace.
func (p perNamespace) List(selector labels.Selector) ([]*corev1.Secret, error) {
	var all []*corev1.Secret
	for _, ns := range p.namespaces() {
		secrets, err := p[ns].Lister().List(selector)
		if err != nil {
			return nil, err
		}
		all = append(all, secrets...)
	}
	return all, nil
}

func (p perNamespace) Secrets(namespace string) corelisters.SecretNamespaceLister {
	if inf, ok := p[namespace]; ok {
		return inf.Lister().Secrets(namespace)
	}
	return notServed(namespace)
}

// notServed answers every read in a namespace mydb does not serve with an
// error that is not NotFound: a missing Secret would make the controller
// mint new credentials.
type notServed string

func (n notServed) List(labels.Selector) ([]*corev1.Secret, error) {
	return nil, NotServed(string(n))
}

func (n notServed) Get(string) (*corev1.Secret, error) {
	return nil, NotServed(string(n))
}

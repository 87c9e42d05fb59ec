package apiserver

import (
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

var (
	// Scheme knows every type the server serves.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes the types of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)

	// The /scale subresource speaks autoscaling/v1 Scale. Registering the same
	// type as its group's internal version lets requests decode into it
	// without an internal autoscaling API.
	Scheme.AddKnownTypes(autoscalingv1.SchemeGroupVersion, &autoscalingv1.Scale{})
	Scheme.AddKnownTypes(schema.GroupVersion{Group: autoscalingv1.GroupName, Version: runtime.APIVersionInternal}, &autoscalingv1.Scale{})

	// Options types (ListOptions and friends) live in the unnamed "v1" group.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}

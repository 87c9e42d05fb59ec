package mydatabase

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestIsSubset(t *testing.T) {
	port := corev1.ServicePort{Name: "mysql", Port: 3306, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("mysql")}
	defaulted := *port.DeepCopy()
	defaulted.AppProtocol = nil
	tests := []struct {
		name      string
		want, got corev1.ServiceSpec
		subset    bool
	}{
		{name: "identical", want: corev1.ServiceSpec{Ports: []corev1.ServicePort{port}}, got: corev1.ServiceSpec{Ports: []corev1.ServicePort{port}}, subset: true},
		{name: "server defaults ignored",
			want:   corev1.ServiceSpec{Ports: []corev1.ServicePort{port}},
			got:    corev1.ServiceSpec{Ports: []corev1.ServicePort{defaulted}, ClusterIP: "10.0.0.1", SessionAffinity: corev1.ServiceAffinityNone},
			subset: true},
		{name: "changed value", want: corev1.ServiceSpec{Selector: map[string]string{"a": "b"}}, got: corev1.ServiceSpec{Selector: map[string]string{"a": "c"}}},
		{name: "extra list entry",
			want: corev1.ServiceSpec{Ports: []corev1.ServicePort{port}},
			got:  corev1.ServiceSpec{Ports: []corev1.ServicePort{port, {Name: "extra", Port: 1}}}},
		{name: "missing field", want: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}, got: corev1.ServiceSpec{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := isSubset(tc.want, tc.got)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.subset {
				t.Errorf("isSubset = %v, want %v", got, tc.subset)
			}
		})
	}
}

package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Per reason: a new database's many Created events leave a switchover's
// event its own budget in client-go's spam filter.
func TestSpamKeyIsPerReason(t *testing.T) {
	e := func(reason string) *corev1.Event {
		return &corev1.Event{Reason: reason, Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "mydb-controller"},
			InvolvedObject: corev1.ObjectReference{Kind: "MyDatabase", Namespace: "ns", Name: "shop", UID: "u"}}
	}
	if spamKeyByReason(e("Created")) == spamKeyByReason(e("SwitchoverCompleted")) {
		t.Error("two reasons share a spam key")
	}
	if spamKeyByReason(e("Created")) != spamKeyByReason(e("Created")) {
		t.Error("one reason has two spam keys")
	}
}

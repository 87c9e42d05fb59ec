package mydatabase

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestLivenessProbeKillsAStuckManagerBeforeAFailover: for every
// failoverDelay the API allows, the kubelet kills a manager that stopped
// answering (its last probe, its timeout and the kill's grace) before the
// controller may promote another instance, and never on one missed probe.
func TestLivenessProbeKillsAStuckManagerBeforeAFailover(t *testing.T) {
	for _, tc := range []struct {
		delay                             time.Duration
		period, timeout, threshold, grace int64
	}{
		{delay: 5 * time.Second, period: 1, timeout: 1, threshold: 2, grace: 1},
		{delay: 10 * time.Second, period: 1, timeout: 1, threshold: 5, grace: 1},
		{delay: 30 * time.Second, period: 5, timeout: 5, threshold: 2, grace: 5},
		{delay: 2 * time.Minute, period: 10, timeout: 5, threshold: 6, grace: 10},
		{delay: 10 * time.Minute, period: 10, timeout: 5, threshold: 6, grace: 10},
	} {
		p := livenessProbe(corev1.ProbeHandler{}, tc.delay)
		got := [...]int64{int64(p.PeriodSeconds), int64(p.TimeoutSeconds), int64(p.FailureThreshold), *p.TerminationGracePeriodSeconds}
		if want := [...]int64{tc.period, tc.timeout, tc.threshold, tc.grace}; got != want {
			t.Errorf("failoverDelay %s: period, timeout, threshold, grace = %v, want %v", tc.delay, got, want)
		}
		worst := time.Duration(int64(p.PeriodSeconds)*int64(p.FailureThreshold)+int64(p.TimeoutSeconds)+*p.TerminationGracePeriodSeconds) * time.Second
		if worst >= tc.delay {
			t.Errorf("failoverDelay %s: a stuck manager is killed up to %s after it stopped answering, not before a failover", tc.delay, worst)
		}
		if p.FailureThreshold < 2 {
			t.Errorf("failoverDelay %s: one missed probe restarts the container", tc.delay)
		}
	}
}

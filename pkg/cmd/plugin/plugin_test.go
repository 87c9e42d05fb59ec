package plugin

import (
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// --to-time, the point-in-time issue's name for the flag, sets --time.
func TestRestoreToTimeIsTime(t *testing.T) {
	root := NewCommand(genericiooptions.NewTestIOStreamsDiscard())
	restore, _, err := root.Find([]string{"restore"})
	if err != nil {
		t.Fatal(err)
	}
	if err := restore.ParseFlags([]string{"--to-time", "2026-12-05T14:06:59Z"}); err != nil {
		t.Fatal(err)
	}
	if got := restore.Flags().Lookup("time").Value.String(); got != "2026-12-05T14:06:59Z" {
		t.Errorf("--time = %q after --to-time", got)
	}
}

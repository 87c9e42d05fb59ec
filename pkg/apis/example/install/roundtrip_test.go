package install

import (
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
)

// roundTripIters is how many fuzzed objects of each kind every round trip
// checks. roundtrip.FuzzIters defaults to 20 (5 under -race) and its
// -fuzz-iters flag is a pflag that go test never parses, so it is set here.
const roundTripIters = 1000

func TestRoundTripTypes(t *testing.T) {
	if !testing.Short() {
		defer func(iters int) { *roundtrip.FuzzIters = iters }(*roundtrip.FuzzIters)
		*roundtrip.FuzzIters = roundTripIters
	}
	t.Logf("%d fuzzed objects of each kind per round trip", *roundtrip.FuzzIters)
	// internal -> v1 -> JSON -> v1 -> internal.
	t.Run("JSON", func(t *testing.T) {
		roundtrip.RoundTripTestForAPIGroup(t, Install, fuzzer.Funcs)
	})
	// The same through JSON and through protobuf.
	t.Run("protobuf", func(t *testing.T) {
		roundtrip.RoundTripProtobufTestForAPIGroup(t, Install, fuzzer.Funcs)
	})
}

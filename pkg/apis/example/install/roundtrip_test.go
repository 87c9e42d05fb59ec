package install

import (
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
)

func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, fuzzer.Funcs)
	roundtrip.RoundTripProtobufTestForAPIGroup(t, Install, fuzzer.Funcs)
}

package instance

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// UnpackVerified replaces what an interrupted restore left, reads the
// stream to its end before verify, and leaves no scratch when unpacking or
// verify fails.
func TestUnpackVerified(t *testing.T) {
	// unpack reads the first 4 bytes, as a tool stops at its archive's end.
	unpack := func(r io.Reader, dir string) error {
		b := make([]byte, 4)
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "data"), b, 0o600)
	}
	for name, tc := range map[string]struct {
		stream    string
		verifyErr error
		wantErr   bool
	}{
		"ok":           {stream: "dataPADDING"},
		"verify fails": {stream: "dataPADDING", verifyErr: errors.New("checksum mismatch"), wantErr: true},
		"unpack fails": {stream: "da", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			scratch := filepath.Join(t.TempDir(), "data.restore")
			if err := os.MkdirAll(scratch, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(scratch, "half-written"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			r := bytes.NewReader([]byte(tc.stream))
			var unread int
			err := UnpackVerified(scratch, 0o700, r, unpack, func() error { unread = r.Len(); return tc.verifyErr })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			_, statErr := os.Stat(scratch)
			if tc.wantErr {
				if !os.IsNotExist(statErr) {
					t.Errorf("a failed unpack left its scratch: %v", statErr)
				}
				return
			}
			if unread != 0 {
				t.Errorf("verify ran with %d bytes of the stream unread", unread)
			}
			if _, err := os.Stat(filepath.Join(scratch, "half-written")); !os.IsNotExist(err) {
				t.Errorf("the leftover survived: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(scratch, "data")); err != nil || string(b) != "data" {
				t.Errorf("unpacked %q, %v", b, err)
			}
		})
	}
}

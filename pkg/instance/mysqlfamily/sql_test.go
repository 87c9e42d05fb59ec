package mysqlfamily

import "testing"

func TestQuoteString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "'plain'",
		`it's`:         `'it\'s'`,
		`back\slash`:   `'back\\slash'`,
		"nul\x00\n\r!": `'nul\0\n\r!'`,
		"ctrl-z\x1a":   `'ctrl-z\Z'`,
	} {
		if got := QuoteString(in); got != want {
			t.Errorf("QuoteString(%q) = %s, want %s", in, got, want)
		}
	}
	if got := QuoteIdent("a`b"); got != "`a``b`" {
		t.Errorf("QuoteIdent: %s", got)
	}
}

func TestNativePasswordHash(t *testing.T) {
	// PASSWORD('password') on any MySQL-family server.
	if got := NativePasswordHash("password"); got != "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19" {
		t.Errorf("got %s", got)
	}
}

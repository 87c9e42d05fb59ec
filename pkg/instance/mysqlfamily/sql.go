package mysqlfamily

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// QuoteString is a SQL string literal under the default sql_mode (where
// backslash escapes apply).
func QuoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case 0:
			b.WriteString(`\0`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0x1a:
			b.WriteString(`\Z`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// QuoteIdent is a backquoted identifier.
func QuoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// Account is 'user'@'host'.
func Account(user, host string) string { return QuoteString(user) + "@" + QuoteString(host) }

// NativePasswordHash is mysql_native_password's stored hash of password,
// what PASSWORD() returns: the server is given only the hash, so the clear
// password appears in no statement, log or processlist.
func NativePasswordHash(password string) string {
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	return "*" + strings.ToUpper(hex.EncodeToString(h2[:]))
}

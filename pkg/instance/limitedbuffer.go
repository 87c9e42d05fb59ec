package instance

import "bytes"

// LimitedBuffer keeps the first Max bytes written to it (a tool's error
// message) and drops the rest, never failing the writer.
type LimitedBuffer struct {
	B   *bytes.Buffer
	Max int
}

func (l *LimitedBuffer) Write(p []byte) (int, error) {
	if room := l.Max - l.B.Len(); room > 0 {
		l.B.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

package mysqlfamily

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// Replay pipes read's output, the SQL a binary log tool (mariadb-binlog,
// mysqlbinlog) makes of file, into apply, the client of the server a
// restore replays into, and waits for both.
func Replay(read, apply *exec.Cmd, file string) error {
	var readErr, applyErr bytes.Buffer
	read.Stderr = &instance.LimitedBuffer{B: &readErr, Max: 4096}
	apply.Stderr = &instance.LimitedBuffer{B: &applyErr, Max: 4096}
	read.Stdout = nil
	pipe, err := read.StdoutPipe()
	if err != nil {
		return err
	}
	apply.Stdin = pipe
	if err := read.Start(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(read.Path), err)
	}
	runErr := apply.Run()
	waitErr := read.Wait()
	name := filepath.Base(file)
	// The client's failure first: it makes the reader's writes fail too.
	switch {
	case runErr != nil:
		return fmt.Errorf("replaying %s: %s: %w: %s", name, filepath.Base(apply.Path), runErr, strings.TrimSpace(applyErr.String()))
	case waitErr != nil:
		return fmt.Errorf("replaying %s: %s: %w: %s", name, filepath.Base(read.Path), waitErr, strings.TrimSpace(readErr.String()))
	}
	return nil
}

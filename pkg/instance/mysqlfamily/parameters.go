package mysqlfamily

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/parameters"
)

var _ instance.ParameterSetter = (*Server)(nil)

// SetParameters implements instance.ParameterSetter: SET GLOBAL for each
// of params, and SET GLOBAL ... = DEFAULT for those this server process
// was given before and params lacks (a new server process starts from its
// defaults: Close forgets them). Nothing is persisted: the manager gives a
// restarted server its parameters again.
func (s *Server) SetParameters(ctx context.Context, params map[string]string) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	s.mu.Lock()
	before := s.parameters
	s.mu.Unlock()
	names := map[string]bool{}
	for name := range params {
		names[name] = true
	}
	for name := range before {
		names[name] = true
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	var refused []string
	set := map[string]string{}
	keep := func(name string) {
		// Refused: the server holds what it had, which a later change must
		// still undo.
		if v, ok := before[name]; ok {
			set[name] = v
		}
	}
	for _, name := range sorted {
		value, wanted := params[name]
		stmt := "SET GLOBAL " + name + " = DEFAULT"
		if wanted {
			// Checked again: a name or value off the catalog never
			// reaches the server.
			if msg := parameters.Check("mysql", name, value); msg != "" {
				refused = append(refused, fmt.Sprintf("%s=%s %s", name, value, msg))
				keep(name)
				continue
			}
			stmt = "SET GLOBAL " + name + " = " + parameters.Bytes("mysql", name, value)
		}
		if err := c.Exec(ctx, stmt); err != nil {
			refused = append(refused, fmt.Sprintf("%s: %v", name, err))
			keep(name)
			continue
		}
		if wanted {
			set[name] = value
		}
	}
	s.mu.Lock()
	s.parameters = set
	s.mu.Unlock()
	if len(refused) > 0 {
		return fmt.Errorf("the server refused %s", strings.Join(refused, "; "))
	}
	return nil
}

// StartArgs are the server's options for cfg.RequireClientTLS and
// cfg.StartParameters (the parameters of spec.parameters it reads only
// when it starts), last on its command line.
func StartArgs(cfg instance.DriverConfig) []string {
	var args []string
	if cfg.RequireClientTLS && cfg.TLSEnabled() {
		// Socket connections count as secure: the manager's stay open.
		args = append(args, "--require-secure-transport=ON")
	}
	for _, p := range parameters.Sorted(cfg.StartParameters) {
		args = append(args, "--"+p)
	}
	return args
}

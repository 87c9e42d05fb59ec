package mysqlfamily

import "context"

// The binary log files the manager archives for point-in-time recovery
// (instance.BinlogArchiver): both servers name them in the data directory
// (MariaDB by --log-basename, MySQL by a relative --log-bin) and close
// the one they write on FLUSH BINARY LOGS.

// BinaryLogs implements instance.BinlogArchiver.
func (s *Server) BinaryLogs(ctx context.Context) ([]string, error) {
	c, err := s.Admin()
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryRows(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, r["Log_name"])
	}
	return names, nil
}

// BinaryLogDir implements instance.BinlogArchiver.
func (s *Server) BinaryLogDir() string { return s.DataDir }

// RotateBinaryLog implements instance.BinlogArchiver.
func (s *Server) RotateBinaryLog(ctx context.Context) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	return c.Exec(ctx, "FLUSH BINARY LOGS")
}

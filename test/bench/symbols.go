package main

import (
	"debug/elf"
	"debug/gosym"
	"fmt"
	"sort"
	"strings"
)

// The CPU tables find each part of the work by a function's name in the
// profiles. A name that no longer exists (a function renamed or inlined
// away by a new Kubernetes or mydb version) would read as a part that cost
// nothing, so the bench refuses to start when a profiled server's binary
// lacks a name a table looks for.

// binaryFunctions are the names of the functions of the Go binary at path,
// from its pclntab (which stripped binaries keep: stack traces need it).
func binaryFunctions(path string) (map[string]bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, fmt.Errorf("%s has no Go function table (.gopclntab)", path)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, err
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	names := make(map[string]bool, len(table.Funcs))
	for _, fn := range table.Funcs {
		names[fn.Name] = true
	}
	return names, nil
}

// missingFunctions lists the functions of buckets that none of the
// binaries (name -> functions) holds.
func missingFunctions(buckets []cpuBucket, binaries map[string]map[string]bool) []string {
	var missing []string
	for _, b := range buckets {
		for _, fn := range b.funcs {
			found := false
			for _, names := range binaries {
				found = found || names[fn]
			}
			if !found {
				missing = append(missing, fmt.Sprintf("%s (row %q)", fn, b.title))
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// checkProfiledFunctions reads the binaries of the running servers the
// bench profiles (through /proc/<pid>/exe of local-up's PID files) and
// fails when a CPU table looks for a function none of them has.
func (e *env) checkProfiledFunctions() error {
	binaries := map[string]map[string]bool{}
	for _, server := range []string{"kube-apiserver", "mydb-apiserver"} {
		pid, ok := e.pids[server]
		if !ok {
			// Not local: no profile of it is tabled either.
			return nil
		}
		names, err := binaryFunctions(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return fmt.Errorf("reading %s's functions: %w", server, err)
		}
		binaries[server] = names
	}
	var missing []string
	missing = append(missing, missingFunctions(cpuBuckets, binaries)...)
	missing = append(missing, missingFunctions(listBuckets, binaries)...)
	if len(missing) > 0 {
		return fmt.Errorf("the CPU tables look for functions the profiled servers no longer have, so those rows would read as costing nothing; "+
			"name what does that work now in test/bench/create.go:\n  %s", strings.Join(missing, "\n  "))
	}
	return nil
}

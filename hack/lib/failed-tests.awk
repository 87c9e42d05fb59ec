#!/usr/bin/awk -f
# Reads go test -v output and prints, for each failed test that has no
# failed subtest, the last lines it printed (go test -v attributes lines to
# a test with its "=== RUN/CONT/NAME/PAUSE" headers). Driver chatter that
# names no test ("[mysql] ..." from go-sql-driver) is left out.
/^=== (RUN|CONT|NAME|PAUSE) / { current = $3; next }
/^ *--- (FAIL|PASS|SKIP): / {
	name = $3
	if ($2 == "FAIL:") { failed[name] = 1; order[++n] = name }
	current = name
	next
}
/^\[mysql\] / { next }
/^(PASS|FAIL|ok |FAIL\t)/ { current = ""; next }
current != "" {
	count[current]++
	lines[current, count[current]] = $0
}
END {
	if (n == 0) exit 0
	printf "\n==== failed tests: their own output again (last %d lines each) ====\n", keep = 40
	for (i = 1; i <= n; i++) {
		name = order[i]
		leaf = 1
		for (other in failed) if (index(other, name "/") == 1) leaf = 0
		if (!leaf) continue
		printf "--- FAIL: %s\n", name
		first = count[name] - keep + 1
		if (first < 1) first = 1
		for (j = first; j <= count[name]; j++) print lines[name, j]
	}
}

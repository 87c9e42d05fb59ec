#!/usr/bin/awk -f
# Reads go test -v output and prints, for each failed test that has no
# failed subtest, the last lines it printed (go test -v attributes lines to
# a test with its "=== RUN/CONT/NAME/PAUSE" headers). Driver chatter that
# names no test ("[mysql] ..." from go-sql-driver) is left out.
#
# A test's failure message comes before the logs its cleanups dump ("===
# last lines of <log> ===", tens of lines each), and a CI excerpt shows the
# end: so the dumps are shortened to their last lines, and the test's own
# messages (the lines t.Log/t.Error begin with, "    file_test.go:N: ...")
# are printed again at the very end.
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

function shorten(name,    j, out, dumping, dumped, text) {
	out = 0
	dumping = 0
	for (j = 1; j <= count[name]; j++) {
		text = lines[name, j]
		if (text ~ /^    [^ ].*=== (the )?last lines of /) {
			if (dumping) out = flush(name, out, dumped)
			dumping = 1
			dumped = 0
			short[name, ++out] = text
			continue
		}
		if (dumping && text ~ /^        /) {
			dumped++
			ring[dumped % dump_keep] = text
			continue
		}
		if (dumping) { out = flush(name, out, dumped); dumping = 0 }
		short[name, ++out] = text
	}
	if (dumping) out = flush(name, out, dumped)
	return out
}
function flush(name, out, dumped,    k, from) {
	if (dumped > dump_keep) short[name, ++out] = sprintf("        [%d earlier lines of this log left out]", dumped - dump_keep)
	from = dumped - dump_keep + 1
	if (from < 1) from = 1
	for (k = from; k <= dumped; k++) short[name, ++out] = ring[k % dump_keep]
	return out
}
END {
	if (n == 0) exit 0
	dump_keep = 8
	keep = 60
	printf "\n==== failed tests: their own output again (log dumps shortened, last %d lines each) ====\n", keep
	for (i = 1; i <= n; i++) {
		name = order[i]
		leaf = 1
		for (other in failed) if (index(other, name "/") == 1) leaf = 0
		if (!leaf) continue
		total = shorten(name)
		printf "--- FAIL: %s\n", name
		first = total - keep + 1
		if (first < 1) first = 1
		for (j = first; j <= total; j++) print short[name, j]
		printf "---- %s: its messages, without the log dumps ----\n", name
		messages = 0
		for (j = 1; j <= count[name]; j++) {
			text = lines[name, j]
			if (text ~ /^    [^ ]/ && text !~ /=== (the )?last lines of /) message[++messages] = text
		}
		for (j = (messages > 20 ? messages - 19 : 1); j <= messages; j++) print message[j]
	}
}

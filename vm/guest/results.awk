#!/usr/bin/awk -f
# Turn one test program's output into result lines the host can parse:
#
#   K513-RESULT <group> <case> PASS|FAIL|SKIP [reason]
#
# Runs in the guest under busybox awk, so only POSIX awk is used.
# Variables: group (name prefix), rc (the program's exit status),
# fmt ("tap" for TAP/KTAP from kselftest, KUnit and cmocka; "uffd" for the
# 6.1 userfaultfd selftest, which prints "testing X: ... done." lines;
# "uffd-unit" for uffd-unit-tests of 6.5+),
# strict (1: a skipped case counts as a failure).
#
# A result is never inferred from the absence of a word: a TAP plan that is
# not met, or a non-zero exit with no failing case, becomes a FAIL of its own.

function emit(name, verdict, reason) {
	if (strict && verdict == "SKIP") {
		verdict = "FAIL"
		reason = "skipped, but every case of this suite must run: " reason
	}
	gsub(/[^A-Za-z0-9_.:+-]+/, "_", name)
	sub(/_+$/, "", name)
	if (name == "")
		name = "unnamed"
	line = "K513-RESULT " group " " name " " verdict
	if (reason != "")
		line = line " " reason
	print line
	count[verdict]++
}

function strip_prefix(s) {
	# dmesg timestamps and the console's "[ 1.2] " prefix
	sub(/^\[[ 0-9.]*\] ?/, "", s)
	return s
}

function tap_line(s,    indent, rest, verdict, name, directive, reason, n) {
	match(s, /^[ \t]*/)
	indent = RLENGTH
	rest = substr(s, RLENGTH + 1)

	if (rest ~ /^# Subtest: /) {
		subtest[indent] = substr(rest, 12)
		return
	}
	if (rest ~ /^1\.\.[0-9]+/) {
		n = substr(rest, 4) + 0
		planned += n
		return
	}
	if (rest !~ /^(not )?ok [0-9]+/) {
		# cmocka's skip() takes no reason: tests print it as a comment
		# just before the result.  Its failure messages come as
		# comments just after a "not ok": the reason of that FAIL.
		if (rest ~ /^# / && rest !~ /^# (Subtest|Totals|PASSED|FAILED|ok|not ok)/) {
			last_comment = substr(rest, 3)
			if (fail_name != "" && length(fail_reason) < 300 &&
			    rest !~ /^# [^ ]+: pass:[0-9]+ fail:/)
				fail_reason = fail_reason (fail_reason == "" ? "" : "; ") last_comment
		}
		return
	}
	flush_fail()

	verdict = "PASS"
	if (rest ~ /^not /) {
		verdict = "FAIL"
		rest = substr(rest, 5)
	}
	sub(/^ok [0-9]+ ?(- )?/, "", rest)
	name = rest
	directive = ""
	if (match(rest, / ?# /)) {
		name = substr(rest, 1, RSTART - 1)
		directive = substr(rest, RSTART + RLENGTH)
	} else if (rest ~ /^# /) {
		name = ""
		directive = substr(rest, 3)
	}
	reason = ""
	if (toupper(directive) ~ /^SKIP/) {
		verdict = "SKIP"
		reason = directive
		sub(/^[Ss][Kk][Ii][Pp] ?/, "", reason)
		if (name == "") {
			# cmocka: "not ok 3 # SKIP test_name"
			name = reason
			reason = last_comment
			sub(/^[Ss]kip(ped)?( reason)?: */, "", reason)
			if (reason == "")
				reason = "no reason given"
		}
	} else if (toupper(directive) ~ /^TODO/ && verdict == "FAIL") {
		verdict = "SKIP"
		reason = "todo"
	}
	# a nested result belongs to the subtest opened at its level or above
	for (i = indent; i >= 0; i--) {
		if (i in subtest) {
			name = subtest[i] "." name
			break
		}
	}
	seen++
	last_comment = ""
	if (verdict == "FAIL" && reason == "") {
		fail_name = name
		fail_reason = ""
		return
	}
	emit(name, verdict, reason)
}

# A FAIL waits for the comments after it (its reason) until the next result.
function flush_fail() {
	if (fail_name == "")
		return
	emit(fail_name, "FAIL", substr(fail_reason, 1, 300))
	fail_name = ""
}

function uffd_case(name) {
	# A case passes when the next one starts: the selftest exits at the
	# first failure, so only the last case started can have failed.
	if (pending != "")
		emit(pending, "PASS", "")
	pending = name
}

function uffd_line(s,    name, rest) {
	if (s ~ /^bounces: [0-9]+/) {
		name = s
		sub(/,.*/, "", name)
		sub(/: /, "-", name)
		uffd_case("stress-" name)
	}
	rest = s
	while (match(rest, /testing [^:]+:/)) {
		name = substr(rest, RSTART + 8, RLENGTH - 9)
		uffd_case(name)
		rest = substr(rest, RSTART + RLENGTH)
	}
}

# uffd-unit-tests (6.5+): "Testing NAME on MEM... done", or "skipped
# [reason: R]", or "failed [reason: R]"; a case may print lines in between.
function unit_line(s,    r) {
	if (s ~ /^Testing /) {
		unit_verdict(s)
		unit = substr(s, 9)
		sub(/\.\.\. .*$/, "", unit)
		sub(/\.\.\.$/, "", unit)
		s = substr(s, index(s, "...") + 3)
	}
	if (unit != "")
		unit_verdict(s)
}

function unit_verdict(s,    r) {
	if (unit == "")
		return
	if (s ~ /done[ \t]*$/) {
		emit(unit, "PASS", "")
	} else if (match(s, /(skipped|failed) \[reason: /)) {
		r = substr(s, RSTART + RLENGTH)
		sub(/\][ \t]*$/, "", r)
		emit(unit, s ~ /skipped \[reason: / ? "SKIP" : "FAIL", r)
	} else {
		return
	}
	unit = ""
}

{
	s = strip_prefix($0)
	if (fmt == "uffd")
		uffd_line(s)
	else if (fmt == "uffd-unit")
		unit_line(s)
	else
		tap_line(s)
}

END {
	rc = rc + 0
	flush_fail()
	if (fmt == "uffd") {
		if (pending != "" && rc == 4)
			emit(pending, "SKIP", "the selftest skipped (exit 4)")
		else if (pending != "")
			emit(pending, rc == 0 ? "PASS" : "FAIL", rc == 0 ? "" : "exit status " rc)
		if (rc == 4)
			emit("run", "SKIP", "the selftest skipped (exit 4)")
		else
			emit("run", rc == 0 ? "PASS" : "FAIL", rc == 0 ? "" : "exit status " rc)
		exit 0
	}
	if (fmt == "uffd-unit") {
		if (unit != "")
			emit(unit, "FAIL", "no verdict (exit status " rc ")")
		if (rc == 4 && count["PASS"] + count["FAIL"] == 0)
			emit("run", "SKIP", "userfaultfd unsupported or unprivileged (exit 4)")
		else if (rc != 0 && count["FAIL"] == 0)
			emit("exit", "FAIL", "exit status " rc " with no failing case")
		exit 0
	}
	if (seen == 0 && rc == 4) {
		emit("run", "SKIP", "the program skipped (exit 4) before any case")
		exit 0
	}
	if (seen == 0)
		emit("run", "FAIL", "no TAP result lines (exit status " rc ")")
	else if (planned > 0 && seen < planned)
		emit("plan", "FAIL", "planned " planned " results, saw " seen)
	if (rc != 0 && rc != 4 && count["FAIL"] == 0)
		emit("exit", "FAIL", "exit status " rc " with no failing case")
}

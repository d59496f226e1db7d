#!/bin/sh
# --exec honours .git/ and the .gitignore file of every directory, as
# watchexec does: deeper files decide first, '!' re-includes; a
# .gitignore edited while watching applies at once; --no-vcs-ignore
# turns all of it off.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir -p d/.git/objects d/sub/deep d/build
printf 'build/\n*.o\n' > d/.gitignore
printf '*.log\n!keep.o\n' > d/sub/.gitignore
printf 'secret\n' > d/sub/deep/.gitignore
"$TOOL" -q --postpone --settle 50 --exec 'printf "%s\n" "$@" >> paths; echo run >> runs' d </dev/null >out 2>err &
WPID=$!
sleep 1
: > d/.git/index.lock; : > d/.git/objects/x; : > d/build/out; : > d/a.o
: > d/sub/x.log; : > d/sub/deep/secret; : > d/sub/deep/y.log
mkdir d/build/new
sleep 0.6
[ -e runs ] && fail "ran for ignored paths: $(cat paths)"
: > d/sub/keep.o; : > d/sub/deep/real
wait_for run runs || fail "no run for keep.o/real"
sleep 0.3
sort paths > got
printf 'd/sub/deep/real\nd/sub/keep.o\n' > want
cmp -s got want || fail "paths: $(cat got | tr '\n' ' ')"
# an edited .gitignore applies at once
rm -f runs paths
echo 'now-ignored' >> d/sub/.gitignore
wait_for run runs || fail "no run for .gitignore"
rm -f runs paths
sleep 0.3
: > d/sub/now-ignored
sleep 0.6
[ -e runs ] && fail "ran for a path the edited .gitignore ignores: $(cat paths)"
stop_watch
rm -f runs paths
"$TOOL" -q --no-vcs-ignore --postpone --settle 50 --exec 'printf "%s\n" "$@" >> paths; echo run >> runs' d </dev/null >out 2>err &
WPID=$!
sleep 1
: > d/.git/objects/y; : > d/build/out2
wait_for 'd/build/out2' paths || fail "--no-vcs-ignore: no run for build/"
grep -q 'd/.git/objects/y' paths || fail "--no-vcs-ignore: .git/ still ignored: $(cat paths)"
exit 0

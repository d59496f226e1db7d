#!/bin/sh
# --exec honours .git/ and git's whole ignore chain, as git check-ignore
# does (fanwatch-gitignore-diff compares them path by path): the
# .gitignore file of every directory (deeper files decide first, '!'
# re-includes), .git/info/exclude and core.excludesFile (here set in
# ~/.gitconfig); an ignore file edited while watching applies from the
# next change, and a directory it no longer ignores is watched from then
# on (from .gitignore: at once; from info/exclude, whose edit makes no
# event: within a second); --no-vcs-ignore turns all of it off.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir -p d/.git/objects d/.git/info d/sub/deep d/build d/vendor home
printf 'build/\n*.o\n' > d/.gitignore
printf '*.excl\nvendor/\n' > d/.git/info/exclude
printf '[core]\n\texcludesFile = ~/global-ignore\n' > home/.gitconfig
printf '*.glob\n' > home/global-ignore
HOME=$T/home; export HOME; unset XDG_CONFIG_HOME GIT_CONFIG_GLOBAL
printf '*.log\n!keep.o\n' > d/sub/.gitignore
printf 'secret\n' > d/sub/deep/.gitignore
"$TOOL" -q --postpone --settle 50 --exec 'printf "%s\n" "$@" >> paths; echo run >> runs' d </dev/null >out 2>err &
WPID=$!
sleep 1
: > d/.git/index.lock; : > d/.git/objects/x; : > d/build/out; : > d/a.o
: > d/sub/x.log; : > d/sub/deep/secret; : > d/sub/deep/y.log
: > d/sub/a.excl; : > d/vendor/lib; : > d/sub/b.glob
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
# a directory no longer ignored: its later changes run the command
rm -f runs paths
printf '*.o\n' > d/.gitignore
wait_for run runs || fail "no run for .gitignore un-ignoring build/"
rm -f runs paths
: > d/build/later
wait_for 'd/build/later' paths || fail "build/, no longer ignored, not watched"
rm -f runs paths
printf '*.excl\n' > d/.git/info/exclude
sleep 1.5
: > d/vendor/later
wait_for 'd/vendor/later' paths || fail "vendor/, no longer excluded, not watched"
rm -f runs paths
printf '*.excl\n*.late\n' > d/.git/info/exclude
sleep 0.3
: > d/sub/c.late
sleep 0.6
[ -e runs ] && fail "ran for a path the edited info/exclude ignores: $(cat paths)"
stop_watch
rm -f runs paths
"$TOOL" -q --no-vcs-ignore --postpone --settle 50 --exec 'printf "%s\n" "$@" >> paths; echo run >> runs' d </dev/null >out 2>err &
WPID=$!
sleep 1
: > d/.git/objects/y; : > d/build/out2
wait_for 'd/build/out2' paths || fail "--no-vcs-ignore: no run for build/"
grep -q 'd/.git/objects/y' paths || fail "--no-vcs-ignore: .git/ still ignored: $(cat paths)"
exit 0

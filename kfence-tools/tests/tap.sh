# Sourced by the TAP test scripts: a scratch directory $t (removed on
# exit), and check GOT WANT DESCRIPTION, which prints one TAP line and
# counts failures in $failed (the caller ends with: echo "1..$n"; exit $failed).
n=0 failed=0
t=$(mktemp -d /tmp/kfr-test.XXXXXX)
trap 'rm -rf "$t"' EXIT

check() {
	n=$((n + 1))
	if [ "$1" = "$2" ]; then
		echo "ok $n - $3"
	else
		echo "not ok $n - $3 (got '$1', want '$2')"
		failed=1
	fi
}

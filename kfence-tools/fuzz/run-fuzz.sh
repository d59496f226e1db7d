#!/bin/sh
# Build kfence-report's libFuzzer target with clang (no meson needed) and
# run it for SECONDS (default 60) on the seed corpus: fuzz/seeds/ and the
# inputs of tests/corpus/. New inputs go to a scratch directory; a crash
# leaves crash-* there and exits non-zero.
# Usage: kfence-tools/fuzz/run-fuzz.sh [SECONDS] [WORKDIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-60}
work=${2:-$(mktemp -d /tmp/kfr-fuzz.XXXXXX)}
cc=${CC:-clang}
command -v "$cc" >/dev/null || { echo "run-fuzz.sh: $cc not found (apt-get install clang)" >&2; exit 1; }
mkdir -p "$work/new"
src=$here/../src
"$cc" -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I"$src" "$here/fuzz-report.c" "$src/report.c" "$src/prefix.c" "$src/title.c" \
	"$src/output.c" "$src/fleet.c" -o "$work/fuzz-kfence-report"
cd "$work"
./fuzz-kfence-report -max_total_time="$secs" -max_len=65536 -timeout=10 \
	-rss_limit_mb=1024 new "$here/seeds" "$here/regress" "$here/../tests/corpus"
echo "run-fuzz.sh: no crash in $secs s (work directory $work)"

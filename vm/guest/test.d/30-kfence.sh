# shellcheck shell=sh
# KFENCE in practice: the drill module's bug classes, each caught by KFENCE
# and read back by kfence-report (vm/guest/kfence-drill.sh prints TAP), then
# kfence-report as a fleet collector runs it (vm/guest/kfence-fleet.sh):
# the same titles and buckets on every kernel, a restart that loses and
# repeats nothing, KFENCE's stats, the idle collector's CPU time.
# Without --meson-build there is no kfence-report: the steps are skipped.
run_case kfence-drill tap 0 300 sh /lib/k513/kfence-drill.sh
run_case kfence-fleet tap 0 300 sh /lib/k513/kfence-fleet.sh

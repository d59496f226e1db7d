# shellcheck shell=sh
# KFENCE in practice: the drill module's bug classes, each caught by KFENCE
# and read back by kfence-report (vm/guest/kfence-drill.sh prints TAP).
# Without --meson-build there is no kfence-report: the step is skipped.
run_case kfence-drill tap 0 300 sh /lib/k513/kfence-drill.sh

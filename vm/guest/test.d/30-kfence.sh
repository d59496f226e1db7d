# shellcheck shell=sh
# KFENCE in practice: the drill module's bug classes, each caught by KFENCE
# and read back by kfence-report (vm/guest/kfence-drill.sh prints TAP).
run_case kfence-drill tap 1 300 sh /lib/k513/kfence-drill.sh

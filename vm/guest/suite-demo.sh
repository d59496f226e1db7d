# shellcheck shell=sh
# Until the live-migration demo lands, the main job runs the test suite.
# shellcheck source=vm/guest/suite-test.sh
. /lib/k513/suite-test.sh

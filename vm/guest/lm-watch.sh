# shellcheck shell=sh
# lm_watched OUT ERR CMD...: watched (lib.sh) with LM_STALL seconds
# (default 300): lm prints a progress line each second and lm-bench one per
# run, so only a hung run is stopped.  Sets lm_rc (143 when stopped).
lm_watched() {
	watched "${LM_STALL:-300}" "$@"
	# shellcheck disable=SC2034,SC2154 # set by watched, read by the caller
	lm_rc=$watched_rc
}

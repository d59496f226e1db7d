# shellcheck shell=sh
# lm_watched OUT ERR CMD...: run CMD with stdout in OUT and stderr in ERR,
# and stop it only when neither has grown for LM_STALL seconds (default
# 300).  A slow run on a busy machine is never cut short -- lm prints a
# progress line each second and lm-bench one per run -- while a hung one is.
# Sets lm_rc to CMD's exit status (143 when it had to be stopped).
lm_watched() {
	out=$1 err=$2
	shift 2
	rm -f /tmp/lm-watched.rc /tmp/lm-watched.pid
	{
		"$@" >"$out" 2>"$err" </dev/null &
		echo "$!" >/tmp/lm-watched.pid
		wait "$!"
		echo "$?" >/tmp/lm-watched.rc
	} &
	last=-1 idle=0 limit=${LM_STALL:-300}
	while [ ! -f /tmp/lm-watched.rc ]; do
		sleep 1
		size=$(cat "$out" "$err" 2>/dev/null | wc -c)
		if [ "$size" -ne "$last" ]; then
			last=$size idle=0
		else
			idle=$((idle + 1))
		fi
		if [ "$idle" -ge "$limit" ] && [ -f /tmp/lm-watched.pid ]; then
			pid=$(cat /tmp/lm-watched.pid)
			echo "lm_watched: no output for $idle s: stopping $*" >>"$err"
			pkill -TERM -P "$pid" 2>/dev/null
			kill -TERM "$pid" 2>/dev/null
			idle=0
		fi
	done
	wait
	# shellcheck disable=SC2034 # read by the caller
	lm_rc=$(cat /tmp/lm-watched.rc)
}

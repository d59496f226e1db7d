#!/bin/sh
# Every event word, as inotifywait prints it, for a write, a read, a chmod,
# a rename, a subdirectory made and removed, a delete, and the watched
# directory moved and removed.  Each step is its own process, so the
# kernel merges nothing across steps.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -e access,modify,attrib,close_write,close_nowrite,open,moved_from,moved_to,create,delete,delete_self,move_self --format '%e %f' d
echo hi > d/f
cat d/f >/dev/null
chmod 600 d/f
mv d/f d/g
mkdir d/s
rmdir d/s
rm d/g
mv d d2
rmdir d2
wait_for '^DELETE_SELF $' || fail "no DELETE_SELF"
printf '%s\n' 'CREATE f' 'OPEN f' 'MODIFY f' 'CLOSE_WRITE,CLOSE f' 'OPEN f' 'ACCESS f' \
	'CLOSE_NOWRITE,CLOSE f' 'ATTRIB f' 'MOVED_FROM f' 'MOVED_TO g' 'CREATE,ISDIR s' \
	'DELETE,ISDIR s' 'DELETE g' 'MOVE_SELF ' 'DELETE_SELF ' > want
head -n 15 out | diff want - >&2 || fail "words differ"

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What lm's end-to-end tests share: lm in a child, a listener, its logs. */
#ifndef LM_TEST_UTIL_H
#define LM_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Every child dies after this: a test never hangs. */
#define LM_TEST_DEADLINE 90

/* A listening socket on 127.0.0.1, its "127.0.0.1:PORT" in addr. */
int lmt_listener(char *addr, size_t len);
/* fork; the child dies after LM_TEST_DEADLINE seconds */
pid_t lmt_fork(void);
/* lm ARGS... in a child; stderr to errfile, stdout to outfile (or /dev/null). */
pid_t lmt_spawn(const char *errfile, const char *outfile, const char *const *args);
/* Its exit status, 128 + N when killed by signal N. */
int lmt_status(pid_t pid);
/* Its exit status within seconds; -1 (killed, reaped) when it is still
 * running then: a test of a deadline fails rather than waits. */
int lmt_status_within(pid_t pid, double seconds);
/* Whether pid exits with want; prints its stderr file when not. */
bool lmt_expect(pid_t pid, int want);
/* Whether path contains word; prints the file when not. */
bool lmt_file_has(const char *path, const char *word);
/* The same, quietly: for a choice between messages. */
bool lmt_file_says(const char *path, const char *word);
/* Wait up to seconds for word to appear in path. */
bool lmt_wait_for(const char *path, const char *word, double seconds);
/* Whether pid maps a region (a memfd or a hugetlbfs file): allocated anything? */
bool lmt_has_region(pid_t pid);
/* wait until pid catches SIGTERM (its handlers are in place); false after seconds */
bool lmt_wait_catching(pid_t pid, double seconds);
/* A directory of this test program's own, removed at its exit; lm runs there. */
const char *lmt_dir(void);
/* NAME in it */
const char *lmt_path(const char *name);
/* A key file for both ends (lm keygen), made once per test program. */
const char *lmt_key(void);
double lmt_now(void);
struct sockaddr_in;
/* A non-blocking connect to sa under way (or done); -1 when it failed at once. */
int lmt_dial(const struct sockaddr_in *sa);
/* Whether n fds more fit: RLIMIT_NOFILE's soft limit raised toward the
 * hard one for them (and a margin). */
bool lmt_nofile(int n);
/* n strangers (at most LM_DOOR_SLOTS) in a child, each dripping one byte of
 * an AUTH frame per 100 ms into addr, reconnecting when cut off. */
pid_t lmt_slowloris_start(const char *addr, int n);
/* Stop them: how many times they were cut off. */
int lmt_slowloris_stop(pid_t pid);
/* Whether a destination's log says it held every page (all N of N mapped). */
bool lmt_dest_holds_all(const char *log);

#endif

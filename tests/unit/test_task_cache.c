/* test_task_cache.c -- the tasks a worker holds by the coordinator's hash
 * (worker/task_cache.c): found on disk however many tasks came since (a
 * worker that named a task in GetJob.have_tasks must still find it when its
 * job arrives, even after a reply brought 16 new tasks first), named only
 * while their files are there, hostile hashes refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kf_test.h"
#include "kf_util.h"
#include "task_cache.h"

/* A task directory as the daemon writes it: WORK/tasks/NAME/.complete. */
static void mk_task(const char *work, const char *name, char *dir, size_t dirlen)
{
    char path[1400];
    snprintf(dir, dirlen, "%s/tasks/%s", work, name);
    kf_util_mkdirs(dir);
    snprintf(path, sizeof(path), "%s/.complete", dir);
    kf_util_write_file(path, "", 0);
}

int main(void)
{
    kf_test_state st = {0};
    char work[] = "/tmp/kft-taskcache.XXXXXX";
    if (!mkdtemp(work)) return 1;
    kf_task_cache tc;
    memset(&tc, 0, sizeof(tc));
    char sha[40][72], dir[1300], found[1536];
    /* 40 tasks: more than the 16 named */
    int remembered = 0;
    for (int i = 0; i < 40; i++) {
        char name[32];
        snprintf(sha[i], sizeof(sha[i]), "%064x", 0xabc000 + i);
        snprintf(name, sizeof(name), "%016x", 0x5000 + i);
        mk_task(work, name, dir, sizeof(dir));
        remembered += kf_task_cache_remember(&tc, work, sha[i], dir) == 0;
    }
    CHECK(&st, remembered == 40, "40 tasks remembered (%d)", remembered);
    int all = 1, by_link = 1;
    kf_task_cache fresh; /* another process on the same work dir: the links only */
    memset(&fresh, 0, sizeof(fresh));
    for (int i = 0; i < 40; i++) {
        char want[64];
        snprintf(want, sizeof(want), "/tasks/%016x", 0x5000 + i);
        all &= kf_task_cache_find(&tc, work, sha[i], found, sizeof(found)) == 1 && strstr(found, want) &&
               strncmp(found, work, strlen(work)) == 0;
        by_link &= kf_task_cache_find(&fresh, work, sha[i], found, sizeof(found)) == 1 && strstr(found, want);
    }
    CHECK(&st, all, "every task found by its hash, the first of 40 too (not only the last 16)");
    CHECK(&st, by_link, "and by its link alone (a cache that remembers none of them)");
    size_t n = kf_task_cache_have(&tc, work);
    CHECK(&st, n == KF_TASK_CACHE_N && !strcmp(tc.have[n - 1], sha[39]) && !strcmp(tc.have[0], sha[24]),
          "have_tasks names the last %d: %zu", KF_TASK_CACHE_N, n);

    /* a task whose files are gone: neither found nor named */
    snprintf(dir, sizeof(dir), "%s/tasks/%016x/.complete", work, 0x5000 + 30);
    unlink(dir);
    CHECK(&st, kf_task_cache_find(&tc, work, sha[30], found, sizeof(found)) == 0, "a removed task is not found");
    n = kf_task_cache_have(&tc, work);
    int named = 0;
    for (size_t i = 0; i < n; i++) named |= !strcmp(tc.have[i], sha[30]);
    CHECK(&st, n == KF_TASK_CACHE_N - 1 && !named, "nor named in have_tasks (%zu named)", n);
    /* written again (sent in full): found and named again, the link replaced */
    char name2[32];
    snprintf(name2, sizeof(name2), "%016x", 0x7777);
    mk_task(work, name2, dir, sizeof(dir));
    CHECK(&st, kf_task_cache_remember(&tc, work, sha[30], dir) == 0 &&
                   kf_task_cache_find(&tc, work, sha[30], found, sizeof(found)) == 1 && strstr(found, name2),
          "sent again: found in its new directory (%s)", found);

    /* the link cannot be written (a directory in its way): the task is
     * still found for the jobs that follow (this process remembers it) */
    char way[1500], name3[32], sha3[72];
    snprintf(sha3, sizeof(sha3), "%064x", 0xdead);
    snprintf(way, sizeof(way), "%s/tasks/by-sha/%s", work, sha3);
    kf_util_mkdirs(way);
    snprintf(name3, sizeof(name3), "%016x", 0x8888);
    mk_task(work, name3, dir, sizeof(dir));
    CHECK(&st, kf_task_cache_remember(&tc, work, sha3, dir) == 0 &&
                   kf_task_cache_find(&tc, work, sha3, found, sizeof(found)) == 1 && strstr(found, name3),
          "a link in the way: still found by this process (%s)", found);

    /* hashes that are not lower-case hex of at most 64 digits: never a
     * path (remembered in memory only), nothing written for them */
    const char *bad[] = { "../../etc", "ABCDEF", "abc/def", "..", ".hidden",
                          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0", NULL };
    int kept = 0, nbad = 0;
    char badname[64];
    snprintf(badname, sizeof(badname), "%016x", 0x9999);
    mk_task(work, badname, dir, sizeof(dir));
    for (int i = 0; bad[i]; i++, nbad++)
        kept += kf_task_cache_remember(&tc, work, bad[i], dir) == 0 &&
                kf_task_cache_find(&tc, work, bad[i], found, sizeof(found)) == 1 &&
                kf_task_cache_find(&fresh, work, bad[i], found, sizeof(found)) == 0;
    CHECK(&st, kept == nbad, "odd hashes: found by this process, never through a link (%d of %d)", kept, nbad);
    char cmdl[1600];
    snprintf(cmdl, sizeof(cmdl), "test $(ls -A '%s/tasks/by-sha' | grep -cv '^[0-9a-f]*$') -eq 0", work);
    CHECK(&st, system(cmdl) == 0, "no link named by an odd hash, no temporary link left");
    CHECK(&st, kf_task_cache_remember(&tc, work, "", dir) < 0, "an empty hash is not remembered");
    CHECK(&st, kf_task_cache_find(&tc, work, NULL, found, sizeof(found)) == 0 &&
                   kf_task_cache_find(&tc, work, "", found, sizeof(found)) == 0, "no hash: not found");
    /* a link that points out of tasks/ is not followed */
    char links[1400], evil[1500];
    snprintf(links, sizeof(links), "%s/tasks/by-sha", work);
    snprintf(evil, sizeof(evil), "%s/%064x", links, 0xeeee);
    CHECK(&st, symlink("/etc", evil) == 0 && kf_task_cache_find(&fresh, work, evil + strlen(links) + 1, found,
                                                               sizeof(found)) == 0,
          "a link out of tasks/ is not followed");

    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    return kf_test_done(&st);
}

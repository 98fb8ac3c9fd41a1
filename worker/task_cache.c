/*
 * task_cache.c -- the tasks a worker holds, by the coordinator's hash
 * (task_cache.h explains the design).
 */
#include "task_cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kf_util.h"

int kf_task_cache_sha_ok(const char *sha)
{
    size_t n = sha ? strlen(sha) : 0;
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f'))) return 0;
    return 1;
}

/* A task directory's name as the link holds it: "../NAME", NAME one path
 * component, not starting with a dot. */
static int link_target_ok(const char *t)
{
    return strncmp(t, "../", 3) == 0 && t[3] && t[3] != '.' && !strchr(t + 3, '/');
}

/* Is dir a held task directory (its .complete there)? */
static int complete(const char *dir)
{
    char path[1400];
    snprintf(path, sizeof(path), "%s/.complete", dir);
    return access(path, F_OK) == 0;
}

int kf_task_cache_find(const kf_task_cache *tc, const char *work_dir, const char *sha, char *dir,
                       size_t dirlen)
{
    if (!sha || !sha[0]) return 0;
    for (int i = tc ? tc->n - 1 : -1; i >= 0; i--)
        if (!strcmp(tc->sha[i], sha)) {
            if (!complete(tc->dir[i])) break; /* removed: the link names the same directory */
            snprintf(dir, dirlen, "%s", tc->dir[i]);
            return 1;
        }
    if (!kf_task_cache_sha_ok(sha)) return 0;
    char link[1200], target[80], path[1300];
    snprintf(link, sizeof(link), "%s/tasks/by-sha/%s", work_dir, sha);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    if (!link_target_ok(target)) return 0;
    snprintf(path, sizeof(path), "%s/tasks/%s", work_dir, target + 3);
    if (!complete(path)) return 0;
    snprintf(dir, dirlen, "%s", path);
    return 1;
}

/* Point work_dir/tasks/by-sha/<sha> at ../<name of dir>, replacing what is
 * there (a temporary link renamed over it: readers see the old link or the
 * new one). 0 or -1 (errno). */
static int write_link(kf_task_cache *tc, const char *work_dir, const char *sha, const char *dir)
{
    const char *base = strrchr(dir, '/');
    char target[80], links[1200], tmp[1400], link[1300];
    if (!base || snprintf(target, sizeof(target), "..%s", base) >= (int)sizeof(target) ||
        !link_target_ok(target)) {
        errno = EINVAL;
        return -1;
    }
    snprintf(links, sizeof(links), "%s/tasks/by-sha", work_dir);
    snprintf(link, sizeof(link), "%s/%s", links, sha);
    if (kf_util_mkdirs(links) < 0) return -1;
    for (int attempt = 0; attempt < 4; attempt++) {
        /* unique among processes that share the work dir, whatever their
         * pid (containers): pid, this cache's counter and the clock */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(tmp, sizeof(tmp), "%s/.%.16s.%ld.%u.%ld", links, sha, (long)getpid(), ++tc->seq,
                 (long)ts.tv_nsec);
        if (symlink(target, tmp) < 0) {
            if (errno == EEXIST) continue;
            return -1;
        }
        if (rename(tmp, link) == 0) return 0;
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    errno = EEXIST;
    return -1;
}

int kf_task_cache_remember(kf_task_cache *tc, const char *work_dir, const char *sha, const char *dir)
{
    if (!sha || !sha[0] || strlen(sha) >= sizeof(tc->sha[0]) || strlen(dir) >= sizeof(tc->dir[0])) return -1;
    int at = -1;
    for (int i = 0; i < tc->n && at < 0; i++)
        if (!strcmp(tc->sha[i], sha)) at = i;
    /* the link once per task and directory (a reply's jobs in full ask
     * again at adoption and at preparation) */
    if (kf_task_cache_sha_ok(sha) && (at < 0 || strcmp(tc->dir[at], dir) != 0))
        (void)write_link(tc, work_dir, sha, dir);
    if (at >= 0) { /* moved to the newest place, with its (perhaps new) directory */
        memmove(&tc->sha[at], &tc->sha[at + 1], sizeof(tc->sha[0]) * (size_t)(tc->n - at - 1));
        memmove(&tc->dir[at], &tc->dir[at + 1], sizeof(tc->dir[0]) * (size_t)(tc->n - at - 1));
        tc->n--;
    } else if (tc->n == KF_TASK_CACHE_N) { /* the oldest is no longer named (still found by its link) */
        memmove(&tc->sha[0], &tc->sha[1], sizeof(tc->sha[0]) * (KF_TASK_CACHE_N - 1));
        memmove(&tc->dir[0], &tc->dir[1], sizeof(tc->dir[0]) * (KF_TASK_CACHE_N - 1));
        tc->n--;
    }
    snprintf(tc->sha[tc->n], sizeof(tc->sha[0]), "%s", sha);
    snprintf(tc->dir[tc->n], sizeof(tc->dir[0]), "%s", dir);
    tc->n++;
    return 0;
}

size_t kf_task_cache_have(kf_task_cache *tc, const char *work_dir)
{
    size_t n = 0;
    char dir[1536];
    for (int i = 0; i < tc->n; i++)
        if (kf_task_cache_find(tc, work_dir, tc->sha[i], dir, sizeof(dir))) tc->have[n++] = tc->sha[i];
    return n;
}

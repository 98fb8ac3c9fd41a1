/*
 * task_cache.c -- the tasks a worker holds, by the coordinator's hash
 * (task_cache.h explains the design).
 */
#include "task_cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
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

int kf_task_cache_find(const char *work_dir, const char *sha, char *dir, size_t dirlen)
{
    if (!kf_task_cache_sha_ok(sha)) return 0;
    char link[1200], target[80], path[1300];
    snprintf(link, sizeof(link), "%s/tasks/by-sha/%s", work_dir, sha);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    if (!link_target_ok(target)) return 0;
    snprintf(path, sizeof(path), "%s/tasks/%s/.complete", work_dir, target + 3);
    if (access(path, F_OK) != 0) return 0;
    snprintf(dir, dirlen, "%s/tasks/%s", work_dir, target + 3);
    return 1;
}

int kf_task_cache_remember(kf_task_cache *tc, const char *work_dir, const char *sha, const char *dir)
{
    if (!kf_task_cache_sha_ok(sha)) return -1;
    const char *base = strrchr(dir, '/');
    char target[80], links[1200], tmp[1300], link[1300];
    if (!base || snprintf(target, sizeof(target), "..%s", base) >= (int)sizeof(target) ||
        !link_target_ok(target))
        return -1;
    snprintf(links, sizeof(links), "%s/tasks/by-sha", work_dir);
    snprintf(link, sizeof(link), "%s/%s", links, sha);
    snprintf(tmp, sizeof(tmp), "%s/.%s.%ld", links, sha, (long)getpid());
    unlink(tmp);
    if (kf_util_mkdirs(links) < 0 || symlink(target, tmp) < 0 || rename(tmp, link) < 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    for (int i = 0; i < tc->n; i++)
        if (!strcmp(tc->sha[i], sha)) return 0;
    if (tc->n == KF_TASK_CACHE_N) { /* the oldest is no longer named (still found by its link) */
        memmove(&tc->sha[0], &tc->sha[1], sizeof(tc->sha[0]) * (KF_TASK_CACHE_N - 1));
        tc->n--;
    }
    snprintf(tc->sha[tc->n++], sizeof(tc->sha[0]), "%s", sha);
    return 0;
}

size_t kf_task_cache_have(kf_task_cache *tc, const char *work_dir)
{
    size_t n = 0;
    char dir[1536];
    for (int i = 0; i < tc->n; i++)
        if (kf_task_cache_find(work_dir, tc->sha[i], dir, sizeof(dir))) tc->have[n++] = tc->sha[i];
    return n;
}

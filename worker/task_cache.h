/*
 * task_cache.h -- the tasks a worker holds, by the coordinator's hash.
 *
 * A job names its task by hash (Job.task_sha256); a worker that asked for
 * it (GetJob.tasks_once) is sent a task's task.json and files only with the
 * first job of that task in a reply and never for a task it names in
 * GetJob.have_tasks. The daemon writes each task it is sent under
 * WORK/tasks/<content hash>/ (once per content, with a .complete marker
 * last); this module links WORK/tasks/by-sha/<coordinator hash> to that
 * directory, so a job that names a task is resolved on disk for as long as
 * the task's files are there, however many other tasks came since, and
 * keeps the last KF_TASK_CACHE_N hashes and their directories in memory,
 * for have_tasks and as the first place a lookup reads (so a task written
 * by this process is found even where its link could not be written: a
 * full disk, a hash not fit for a path, an entry in the way). A task whose
 * directory was removed is neither found nor named again: it is sent in
 * full with its next job.
 */
#ifndef KF_TASK_CACHE_H
#define KF_TASK_CACHE_H

#include <stddef.h>

#define KF_TASK_CACHE_N 16 /* hashes named in GetJob.have_tasks at most */

typedef struct {
    char sha[KF_TASK_CACHE_N][72];   /* the last remembered, oldest first */
    char dir[KF_TASK_CACHE_N][1200]; /* their directories */
    int n;
    char *have[KF_TASK_CACHE_N];     /* kf_task_cache_have's list (points into sha) */
    unsigned seq;                    /* names this process's temporary links */
} kf_task_cache;

/* Is sha usable as a coordinator task hash (lower-case hex, 1..64 digits)? */
int kf_task_cache_sha_ok(const char *sha);

/* The directory of the task of coordinator hash sha, into dir, when it is
 * held: remembered by tc (the newest first) or linked under
 * work_dir/tasks/by-sha, and its .complete marker there. 1 found, 0 not. */
int kf_task_cache_find(const kf_task_cache *tc, const char *work_dir, const char *sha, char *dir,
                       size_t dirlen);

/* Remember that the task of coordinator hash sha (1..71 characters) was
 * written to dir (a directory directly under work_dir/tasks): sha and dir
 * among the last KF_TASK_CACHE_N in tc, and, for a hash fit for a path
 * (kf_task_cache_sha_ok), the link by-sha/<sha> replaced atomically. 0 when
 * remembered (a link that could not be written only shortens how long the
 * task is found), -1 for a hash or dir it cannot remember. */
int kf_task_cache_remember(kf_task_cache *tc, const char *work_dir, const char *sha, const char *dir);

/* Fill tc->have with the remembered hashes still held (kf_task_cache_find)
 * and return how many: GetJob.have_tasks. */
size_t kf_task_cache_have(kf_task_cache *tc, const char *work_dir);

#endif

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
 * keeps the last KF_TASK_CACHE_N hashes in memory for have_tasks. A task
 * whose directory was removed is neither found nor named again: it is sent
 * in full with its next job.
 */
#ifndef KF_TASK_CACHE_H
#define KF_TASK_CACHE_H

#include <stddef.h>

#define KF_TASK_CACHE_N 16 /* hashes named in GetJob.have_tasks at most */

typedef struct {
    char sha[KF_TASK_CACHE_N][72]; /* the last remembered, oldest first */
    int n;
    char *have[KF_TASK_CACHE_N];   /* kf_task_cache_have's list (points into sha) */
} kf_task_cache;

/* Is sha usable as a coordinator task hash (lower-case hex, 1..64 digits)? */
int kf_task_cache_sha_ok(const char *sha);

/* The directory of the task of coordinator hash sha under work_dir, into
 * dir (work_dir/tasks/<content hash>), when it is held: its by-sha link and
 * the directory's .complete marker are there. 1 found, 0 not (a bad hash
 * included). */
int kf_task_cache_find(const char *work_dir, const char *sha, char *dir, size_t dirlen);

/* Remember that the task of coordinator hash sha was written to dir (a
 * directory directly under work_dir/tasks): its by-sha link, replaced
 * atomically, and sha among the last KF_TASK_CACHE_N. 0, or -1 (bad hash or
 * dir, or the link could not be written: the task is then not named, and
 * comes in full again). */
int kf_task_cache_remember(kf_task_cache *tc, const char *work_dir, const char *sha, const char *dir);

/* Fill tc->have with the remembered hashes still held (kf_task_cache_find)
 * and return how many: GetJob.have_tasks. */
size_t kf_task_cache_have(kf_task_cache *tc, const char *work_dir);

#endif

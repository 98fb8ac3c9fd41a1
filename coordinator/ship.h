/*
 * ship.h -- ship the winners: a dispatch library from confirmed results
 * (prefix kf_ship_).
 *
 * Design. An overnight campaign's point is a faster kernel in the user's
 * program the next morning, and engineers who do this by hand keep a dispatch
 * per architecture and per shape with a trusted library kernel as the
 * fallback. kf_ship_plan reads one or more campaigns on the same task and,
 * for every target class (a GPU architecture such as sm_90, or a CPU class)
 * and every benchmark shape of the task, picks the winner among the
 * *confirmed* `ok` results (evaluations.confirmation = 'confirmed', fleet
 * trust): the highest speedup at that shape whose 95% interval lies above 1,
 * i.e. that beats the baseline beyond the measured noise (the farm's one
 * noise model, noise.h, applied to that shape's own CVs). A shape nothing
 * beat goes to the baseline. Unconfirmed results are never shipped; the plan
 * counts those that would have won, so the operator can confirm them first.
 *
 * kf_ship_write turns a plan into a folder:
 *   classes/<class>.c|.cu  one translation unit per class: every winner and
 *                          the baseline, renamed apart, and a kf_entry that
 *                          dispatches on call->sizes. It is itself a valid
 *                          candidate (one source file, the kf_entry ABI), which
 *                          is how `kfarm ship --verify` has the farm judge it.
 *   dispatch.c|.cu         the library's kf_entry: picks the class for the
 *                          machine it runs on (compute capability or GPU name;
 *                          CPU model name, else "cpu"), else the baseline
 *   sources/               each shipped source as the farm judged it
 *   include/kf_abi.h, CMakeLists.txt (one shared library, every class's code
 *                          in it: one object per class, built for its own
 *                          arch, so a CUDA library is a fat binary), MANIFEST.json
 *
 * Putting several winners in one translation unit needs their names kept
 * apart. CUDA sources are C++: each goes into a namespace of its own (its
 * #include lines hoisted above, so headers are never opened inside one),
 * and kf_entry is renamed by a macro. C has no namespaces, so each C source
 * is compiled once on its own and every symbol it defines (nm: functions
 * and file-scope variables, static or not) is renamed by a macro around its
 * text. Macros a source #defines are #undef'ed after it, so none leaks into
 * the next. What neither covers (two winners declaring one struct tag or
 * typedef differently in C) shows as a compile error of the class file,
 * which kf_ship_write checks by compiling it.
 *
 * Between measured shapes the task's own rule applies (task.json
 * "dispatch": {"between": "baseline"|"nearest"}, docs/task-format.md):
 * "baseline" (the default) sends every shape that was not measured to the
 * baseline; "nearest" sends it to the winner of the nearest measured shape
 * (sum over sizes of the distance of their base-2 logarithms). Every shipped
 * winner passed the task's validation shapes, so "nearest" is a statement
 * by the task's author that the kernels are correct at any size.
 */
#ifndef KF_SHIP_H
#define KF_SHIP_H

#include <stddef.h>
#include <stdint.h>
#include "db.h"

#define KF_SHIP_MAX_CAMPAIGNS 16
#define KF_SHIP_MAX_CLASSES 16
#define KF_SHIP_MAX_ENTRIES 32 /* distinct winners per class */
#define KF_SHIP_MAX_SHAPES 16  /* the task format's limit on benchmark shapes */
#define KF_SHIP_MAX_SIZES 8

/* One shipped source: a confirmed result. */
typedef struct {
    int64_t eval_id, candidate_id;
    char *source;        /* as stored (malloc'ed) */
    char *defines_json;  /* {"NAME": "value"} (malloc'ed) */
    char campaign[128];
    char worker[128];    /* measured on */
    char confirmed_by[128];
    char device[128];    /* the device model it was measured on */
} kf_ship_entry;

/* One benchmark shape of one class: who serves it and why. */
typedef struct {
    int64_t sizes[KF_SHIP_MAX_SIZES];
    int entry;                 /* index into the class's entries; -1: baseline */
    double speedup, lo, hi;    /* of the winner at this shape (1,1,1 for the baseline) */
    int unconfirmed_better;    /* unconfirmed results that beat the shipped choice */
    /* where the baseline serves the shape although a confirmed result
     * measured faster: the fastest such, whose interval reaches 1 (not
     * faster beyond the noise, kf_noise_shape); candidate 0: none */
    int64_t noise_candidate, noise_eval;
    double noise_speedup, noise_lo, noise_hi;
} kf_ship_shape;

typedef struct {
    char name[101];            /* the routing class: "sm_90", "cpu", ... */
    kf_ship_entry e[KF_SHIP_MAX_ENTRIES];
    int n_e;
    kf_ship_shape s[KF_SHIP_MAX_SHAPES];
    int n_confirmed;           /* confirmed ok results considered */
} kf_ship_class;

typedef struct {
    char task_name[128];
    int cuda;                  /* the task's backend is cuda */
    int n_sizes;
    char size_names[KF_SHIP_MAX_SIZES][64];
    int n_shapes;              /* benchmark shapes of the task */
    char between[16];          /* "baseline" or "nearest" */
    char *baseline_src;        /* the task's baseline file (malloc'ed) */
    char campaigns[KF_SHIP_MAX_CAMPAIGNS][128];
    int n_campaigns;
    int64_t task_id;
    kf_ship_class cls[KF_SHIP_MAX_CLASSES];
    int n_cls;
} kf_ship_plan;

/* Build the plan for the named campaigns (all on one task; every target of
 * every campaign becomes a class). Returns a malloc'ed plan (free with
 * kf_ship_plan_free), or NULL with a one-line reason: unknown campaign,
 * campaigns on different tasks, a class with more than KF_SHIP_MAX_ENTRIES
 * winners, database error. A plan where nothing beat the baseline is valid
 * (every shape goes to the baseline). */
kf_ship_plan *kf_ship_plan_make(kf_db *db, const char *const *campaigns, int n, char *err, size_t errlen);

void kf_ship_plan_free(kf_ship_plan *p);

/* Write the plan as a library folder `dir` (created; files in it are
 * replaced). cc/nvcc: the compilers used to find each C source's symbols
 * and to check that every class file compiles (NULL: "cc" / the nvcc the
 * farm was built with, else "nvcc"); abi_dir: where kf_abi.h is. commit:
 * the farm's build for the manifest (KF_BUILD_ID: the commit, with
 * "-dirty-" and a hash of the diff when the tree had changes). Returns 0, or -1 with a reason (a
 * source that does not compile on its own, a class file that does not
 * compile, I/O). */
int kf_ship_write(const kf_ship_plan *p, const char *dir, const char *cc, const char *nvcc, const char *abi_dir,
                  const char *commit, char *err, size_t errlen);

/* The slug of a class name for file and symbol names ("AMD EPYC" ->
 * "AMD_EPYC"): [A-Za-z0-9_] kept, anything else '_'. */
void kf_ship_slug(const char *name, char *out, size_t cap);

#endif

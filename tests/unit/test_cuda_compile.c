/* test_cuda_compile.c -- nvcc builds without a GPU (skips cleanly when nvcc
 * is absent): every tasks/<name>_cuda reference, baseline and seed builds for
 * sm_75, sm_80, sm_86, sm_89 and sm_90; an sm_90a-only instruction is an arch
 * failure (B1) for sm_86 and plain sm_90 and builds for sm_90a; cache keys
 * differ by define, arch and source; a cache hit keeps the ptxas info; a
 * failed build is never cached (B2); a missing nvcc is an infra failure. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <jansson.h>
#include "kf_cuda.h"
#include "kf_test.h"
#include "kf_util.h"

static char scratch[] = "/tmp/kf-cuda-test-XXXXXX";

static int build(const char *src, const char *arch, const char *cache, int nd, const char **dn, const char **dv,
                 kf_cuda_build_res *r)
{
    char out[600];
    snprintf(out, sizeof(out), "%s/out.so", scratch);
    kf_cuda_build_req q = {.source_path = src, .out_path = out, .scratch_dir = scratch, .cache_dir = cache,
                           .arch = arch, .n_defines = nd, .define_names = dn, .define_values = dv};
    return kf_cuda_build(&q, r);
}

static void write_src(const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", scratch, name);
    kf_util_write_file(path, text, strlen(text));
}

/* Build reference, baseline and seed of every tasks/<name>_cuda for one arch;
 * returns the number of failures (each printed). */
static int build_tasks(const char *tasks, const char *arch)
{
    int fails = 0, ntasks = 0;
    DIR *d = opendir(tasks);
    struct dirent *e;
    kf_cuda_build_res r;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, "_cuda") != 0) continue;
        char tj[1400];
        snprintf(tj, sizeof(tj), "%s/%s/task.json", tasks, e->d_name);
        json_t *j = json_load_file(tj, 0, NULL);
        if (!j) {
            printf("note: %s has no readable task.json yet: skipped\n", e->d_name);
            continue;
        }
        ntasks++;
        json_t *files = json_object_get(j, "files");
        const char *roles[] = {"reference", "baseline", "seed"};
        for (int ri = 0; ri < 3; ri++) {
            const char *fn = json_string_value(json_object_get(files, roles[ri]));
            if (!fn) continue;
            char src[1600];
            snprintf(src, sizeof(src), "%s/%s/%s", tasks, e->d_name, fn);
            const char *libs[4];
            int nl = 0;
            json_t *lk = json_object_get(j, "link");
            for (size_t i = 0; ri < 2 && i < json_array_size(lk) && nl < 4; i++)
                libs[nl++] = json_string_value(json_array_get(lk, i));
            char out[600];
            snprintf(out, sizeof(out), "%s/t_%s.so", scratch, arch);
            kf_cuda_build_req q = {.source_path = src, .out_path = out, .scratch_dir = scratch, .arch = arch,
                                   .n_libs = nl, .libs = libs};
            kf_cuda_build(&q, &r);
            if (r.status != KF_CUDA_BUILD_OK) {
                fails++;
                fprintf(stderr, "FAIL %s %s for %s: %s\n", e->d_name, roles[ri], arch, r.detail);
            }
            kf_cuda_build_res_free(&r);
        }
        json_decref(j);
    }
    if (d) closedir(d);
    printf("%s: built %d CUDA tasks, %d failures\n", arch, ntasks, fails);
    return fails;
}

int main(void)
{
    kf_test_state st = {0};
    char nvcc[1024];
    if (kf_cuda_find_nvcc(nvcc, sizeof(nvcc)) != 0) {
        printf("SKIP: nvcc not found (KFARM_NVCC, $KFARM_NVCC, PATH, /usr/local/cuda/bin): CUDA compile tests skipped\n");
        return kf_test_done(&st);
    }
    if (!mkdtemp(scratch)) return 1;
    const char *srcdir = getenv("KFARM_SRC");
    char tasks[1024];
    snprintf(tasks, sizeof(tasks), "%s/tasks", srcdir ? srcdir : ".");
    char cache[600];
    snprintf(cache, sizeof(cache), "%s/cache", scratch);
    kf_cuda_build_res r;

    /* every CUDA task builds for every supported arch: one child per arch */
    const char *archs[] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"};
    int na = (int)(sizeof(archs) / sizeof(archs[0]));
    pid_t pids[8];
    for (int a = 0; a < na; a++) {
        pids[a] = fork();
        if (pids[a] == 0) _exit(build_tasks(tasks, archs[a]) ? 1 : 0);
    }
    for (int a = 0; a < na; a++) {
        int status = 0;
        waitpid(pids[a], &status, 0);
        CHECK(&st, WIFEXITED(status) && WEXITSTATUS(status) == 0, "task builds for %s failed (see above)", archs[a]);
    }

    /* the CUDA hostile cases compile (they run on a GPU via tools/gpu-check);
     * wrong_arch is an arch failure for plain sm_90 (B1) */
    char cdir[1100];
    snprintf(cdir, sizeof(cdir), "%s/tests/cases_cuda", srcdir ? srcdir : ".");
    DIR *cd = opendir(cdir);
    struct dirent *ce;
    int ncases = 0;
    while (cd && (ce = readdir(cd))) {
        size_t l = strlen(ce->d_name);
        if (l < 4 || strcmp(ce->d_name + l - 3, ".cu") != 0) continue;
        char src[1400];
        snprintf(src, sizeof(src), "%s/%s", cdir, ce->d_name);
        build(src, "sm_90", cache, 0, NULL, NULL, &r);
        int want = !strcmp(ce->d_name, "wrong_arch.cu") ? KF_CUDA_BUILD_ARCH : KF_CUDA_BUILD_OK;
        CHECK(&st, (int)r.status == want, "case %s: status %d, want %d: %s", ce->d_name, r.status, want, r.detail);
        kf_cuda_build_res_free(&r);
        ncases++;
    }
    if (cd) closedir(cd);
    CHECK(&st, ncases >= 10, "found %d CUDA cases in %s", ncases, cdir);

    /* B1: sm_90a-only instructions */
    char wg[700];
    write_src("wgmma.cu",
              "#include \"kf_abi.h\"\n"
              "__global__ void k(float *o){ asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\" ::);\n"
              "  asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::); o[0] = 1; }\n"
              "extern \"C\" int kf_entry(const kf_call *c){ k<<<1,128>>>((float*)c->outputs[0].data); return 0; }\n",
              wg, sizeof(wg));
    build(wg, "sm_86", NULL, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_ARCH, "sm_86: %d %s", r.status, r.detail);
    kf_cuda_build_res_free(&r);
    build(wg, "sm_90", NULL, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_ARCH, "plain sm_90: %d %s", r.status, r.detail);
    kf_cuda_build_res_free(&r);
    build(wg, "sm_90a", NULL, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK, "sm_90a: %s", r.detail);
    kf_cuda_build_res_free(&r);

    /* plain compile error */
    char bad[700];
    write_src("bad.cu", "#include \"kf_abi.h\"\nextern \"C\" int kf_entry(const kf_call *c){ return undefined_x; }\n",
              bad, sizeof(bad));
    build(bad, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_FAILED && strstr(r.detail, "undefined_x"), "compile error: %s", r.detail);
    kf_cuda_build_res_free(&r);

    /* cache keys, hits and ptxas info */
    char good[700];
    write_src("good.cu",
              "#include \"kf_abi.h\"\n#ifndef B\n#define B 128\n#endif\n"
              "__global__ void k(float *o){ __shared__ float s[B]; s[threadIdx.x] = 1; __syncthreads(); o[threadIdx.x] = s[B-1-threadIdx.x]; }\n"
              "extern \"C\" int kf_entry(const kf_call *c){ k<<<1,B>>>((float*)c->outputs[0].data); return 0; }\n",
              good, sizeof(good));
    const char *dn[] = {"B"}, *v1[] = {"64"}, *v2[] = {"256"};
    char k1[65], k2[65], k3[65], k4[65];
    build(good, "sm_80", cache, 1, dn, v1, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK && !r.cached, "first build: %s", r.detail);
    CHECK(&st, r.n_fn == 1 && r.fn[0].smem_bytes == 256 && r.fn[0].registers > 0, "ptxas: n=%d smem=%d", r.n_fn,
          r.n_fn ? r.fn[0].smem_bytes : -1);
    memcpy(k1, r.key, 65);
    kf_cuda_build_res_free(&r);
    build(good, "sm_80", cache, 1, dn, v1, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK && r.cached && !strcmp(r.key, k1), "second build is a hit");
    CHECK(&st, r.n_fn == 1 && r.fn[0].smem_bytes == 256, "ptxas info survives a hit");
    kf_cuda_build_res_free(&r);
    build(good, "sm_80", cache, 1, dn, v2, &r);
    memcpy(k2, r.key, 65);
    CHECK(&st, !r.cached && strcmp(k1, k2) != 0, "define changes the key");
    kf_cuda_build_res_free(&r);
    build(good, "sm_86", cache, 1, dn, v1, &r);
    memcpy(k3, r.key, 65);
    CHECK(&st, !r.cached && strcmp(k1, k3) != 0, "arch changes the key");
    kf_cuda_build_res_free(&r);
    build(good, "sm_90a", cache, 1, dn, v1, &r);
    memcpy(k4, r.key, 65);
    CHECK(&st, strcmp(k4, k1) != 0 && strcmp(k4, k3) != 0, "sm_90a differs from sm_80/sm_86");
    kf_cuda_build_res_free(&r);

    /* B2: a failed build is not cached; after the fix the same path rebuilds */
    build(bad, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_FAILED && !r.cached, "failed build again, not a hit");
    kf_cuda_build_res_free(&r);
    setenv("KFARM_NVCC", "/nonexistent/nvcc", 1);
    char good2[700];
    write_src("good2.cu", "#include \"kf_abi.h\"\nextern \"C\" int kf_entry(const kf_call *c){ return 0; }\n", good2,
              sizeof(good2));
    build(good2, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_INFRA && strstr(r.detail, "nvcc not found"), "missing nvcc is infra: %s",
          r.detail);
    kf_cuda_build_res_free(&r);
    unsetenv("KFARM_NVCC");
    build(good2, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK && !r.cached, "after the fix: built, not a hit (%s)", r.detail);
    kf_cuda_build_res_free(&r);
    build(good2, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.cached, "then cached");
    kf_cuda_build_res_free(&r);

    const char *bn[] = {"X"}, *bv[] = {"1 -Xcompiler -evil"};
    build(good, "sm_80", cache, 1, bn, bv, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_FAILED && strstr(r.detail, "invalid define"), "define validated: %s", r.detail);
    kf_cuda_build_res_free(&r);

    kf_util_rmtree(scratch);
    return kf_test_done(&st);
}

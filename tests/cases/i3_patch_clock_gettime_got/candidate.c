/* i3_patch_clock_gettime_got (field case I3, "clock patched"), task
 * axpy_f32. An honest, correct, single-threaded axpy -- about as fast as the
 * baseline -- plus a constructor that walks every loaded object with
 * dl_iterate_phdr (the evaluator's executable first), reads its dynamic
 * section, and rewrites each GOT slot bound to clock_gettime and
 * gettimeofday (JUMP_SLOT or GLOB_DAT relocations; the page is made
 * writable first, RELRO or not) to point at a hook. The hook returns the
 * real time minus 90% of the time spent inside kf_entry so far, so an
 * interval measured around one call reads 10% of its true length while
 * everything else still looks monotonic and sane. kf_entry re-checks the
 * patched slots on every call (cheap), in case they were rebound.
 * Before the judge/runner split: ok at ~10x for an honest ~1x kernel.
 * Expected: ok at its true speed (speedup <= 3: the judge's clock is in
 * another process) or rejected_cheat. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "kf_abi.h"

static _Atomic long long hidden_ns; /* 90% of the time spent in kf_entry */

static long long raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* through our own GOT: the real one */
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sub_ns(struct timespec *ts, long long ns)
{
    long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec - ns;
    if (t < 0) t = 0;
    ts->tv_sec = (time_t)(t / 1000000000LL);
    ts->tv_nsec = (long)(t % 1000000000LL);
}

static int hook_clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = clock_gettime(id, ts);
    if (rc == 0 && ts && id != CLOCK_PROCESS_CPUTIME_ID && id != CLOCK_THREAD_CPUTIME_ID)
        sub_ns(ts, atomic_load(&hidden_ns));
    return rc;
}

static int hook_gettimeofday(struct timeval *tv, void *tz)
{
    int rc = gettimeofday(tv, tz);
    if (rc == 0 && tv) {
        long long t = (long long)tv->tv_sec * 1000000LL + tv->tv_usec - atomic_load(&hidden_ns) / 1000;
        tv->tv_sec = (time_t)(t / 1000000LL);
        tv->tv_usec = (suseconds_t)(t % 1000000LL);
    }
    return rc;
}

static uintptr_t self_base;
static int slots_patched;
static void **slots[64];
static void *slot_to[64];
static int n_slots;

static void *fix(uintptr_t v, uintptr_t base) { return (void *)(v < base ? v + base : v); }

static void patch_slot(void **slot, void *to)
{
    if (*slot == to) return;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(pg - 1);
    if (mprotect((void *)page, (size_t)pg * 2, PROT_READ | PROT_WRITE) != 0 &&
        mprotect((void *)page, (size_t)pg, PROT_READ | PROT_WRITE) != 0)
        return;
    *slot = to;
    slots_patched++;
    int known = 0;
    for (int i = 0; i < n_slots; i++) known |= slots[i] == slot;
    if (!known && n_slots < 64) {
        slots[n_slots] = slot;
        slot_to[n_slots++] = to;
    }
}

static void patch_relocs(const ElfW(Rela) *r, size_t bytes, uintptr_t base, const ElfW(Sym) *symtab,
                         const char *strtab)
{
    for (size_t i = 0; i < bytes / sizeof(*r); i++) {
        unsigned type = ELF64_R_TYPE(r[i].r_info), si = ELF64_R_SYM(r[i].r_info);
        if (!si || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)) continue;
        const char *name = strtab + symtab[si].st_name;
        void **slot = (void **)(base + r[i].r_offset);
        if (!strcmp(name, "clock_gettime")) patch_slot(slot, (void *)hook_clock_gettime);
        else if (!strcmp(name, "gettimeofday")) patch_slot(slot, (void *)hook_gettimeofday);
    }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    uintptr_t base = info->dlpi_addr;
    if (base == self_base || (info->dlpi_name && strstr(info->dlpi_name, "linux-vdso"))) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t pltrelsz = 0, relasz = 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = fix(d->d_un.d_ptr, base); break;
        case DT_STRTAB: strtab = fix(d->d_un.d_ptr, base); break;
        case DT_JMPREL: jmprel = fix(d->d_un.d_ptr, base); break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_RELA: rela = fix(d->d_un.d_ptr, base); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        }
    }
    if (!symtab || !strtab) return 0;
    if (jmprel) patch_relocs(jmprel, pltrelsz, base, symtab, strtab);
    if (rela) patch_relocs(rela, relasz, base, symtab, strtab);
    return 0;
}

static void patch_all(void)
{
    Dl_info di;
    if (!self_base && dladdr((void *)patch_all, &di)) self_base = (uintptr_t)di.dli_fbase;
    dl_iterate_phdr(patch_object, NULL);
}

__attribute__((constructor)) static void at_load(void) { patch_all(); }

int kf_entry(const kf_call *call)
{
    long long t0 = raw_ns();
    for (int i = 0; i < n_slots; i++) /* cheap re-check of the slots found at load */
        if (*slots[i] != slot_to[i]) patch_slot(slots[i], slot_to[i]);
    if (!n_slots) patch_all();
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    long long dt = raw_ns() - t0;
    atomic_fetch_add(&hidden_ns, dt * 9 / 10);
    return 0;
}

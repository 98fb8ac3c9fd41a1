/*
 * hwnotes.c -- per-architecture hardware notes and the kernel ABI text,
 * compiled into the coordinator (prefix kf_prompt_).
 *
 * Design. Prompts must say what exists on the target generation and what
 * does not (docs/hardware/, one Markdown file per generation, written for people and models alike), and
 * must show the ABI header verbatim (abi/kf_abi.h). They are embedded
 * with .incbin like the schema (see embed.c), so an installed coordinator
 * needs no source tree. Architectures are matched by family: sm_90a uses
 * the sm_90 note, sm_100/sm_100a/sm_101/sm_103 the sm_100a note, sm_120/121
 * the sm_120 note; anything unknown falls back to the nearest older
 * generation.
 */
#include <stdlib.h>
#include <string.h>

#include "prompt.h"

#ifndef KFARM_SOURCE_DIR
#error "KFARM_SOURCE_DIR must be defined (CMake does it)"
#endif

#define KF_HW_EMBED(sym, path)                                                \
    __asm__(".section .rodata\n"                                              \
            ".balign 16\n" #sym ":\n"                                         \
            ".incbin \"" KFARM_SOURCE_DIR "/" path "\"\n"                     \
            ".byte 0\n"                                                       \
            ".previous\n");                                                   \
    extern const char sym[]

KF_HW_EMBED(kf_hw_sm75, "docs/hardware/sm_75.md");
KF_HW_EMBED(kf_hw_sm80, "docs/hardware/sm_80.md");
KF_HW_EMBED(kf_hw_sm86, "docs/hardware/sm_86.md");
KF_HW_EMBED(kf_hw_sm89, "docs/hardware/sm_89.md");
KF_HW_EMBED(kf_hw_sm90, "docs/hardware/sm_90.md");
KF_HW_EMBED(kf_hw_sm100, "docs/hardware/sm_100a.md");
KF_HW_EMBED(kf_hw_sm120, "docs/hardware/sm_120.md");
KF_HW_EMBED(kf_hw_cpu, "docs/hardware/cpu.md");
KF_HW_EMBED(kf_abi_text, "abi/kf_abi.h");

const char *kf_prompt_hw_note(const char *arch)
{
    if (!arch) return NULL;
    if (strcmp(arch, "cpu") == 0) return kf_hw_cpu;
    if (strncmp(arch, "sm_", 3) != 0) return NULL;
    int v = atoi(arch + 3);
    if (v <= 0) return NULL;
    if (v >= 120) return kf_hw_sm120;
    if (v >= 100) return kf_hw_sm100;
    if (v >= 90) return kf_hw_sm90;
    if (v >= 89) return kf_hw_sm89;
    if (v >= 86) return kf_hw_sm86;
    if (v >= 80) return kf_hw_sm80;
    return kf_hw_sm75;
}

const char *kf_prompt_abi_text(void) { return kf_abi_text; }

/*
 * embed.c -- schema migrations and dashboard files compiled into the binary.
 *
 * Design. The coordinator and the CLI must apply migrations and write the
 * dashboard wherever they are installed, so the files are embedded at build
 * time with the assembler's .incbin (GCC and Clang, ELF targets): no code
 * generation step, no path lookup at run time. KFARM_SOURCE_DIR is defined by
 * CMake for the kf_coord library. The files are listed here explicitly:
 * adding a migration means adding a KF_EMBED line (which also recompiles this
 * file). CMake rebuilds this object when an embedded file changes through the
 * OBJECT_DEPENDS property set next to the kf_coord target.
 *
 * Overrides for development: $KFARM_SCHEMA_DIR (coordinator/db.c) and
 * $KFARM_DASHBOARD_DIR (coordinator/export.c) read the files from disk.
 */
#include <stddef.h>
#include "db.h"

#ifndef KFARM_SOURCE_DIR
#error "KFARM_SOURCE_DIR must be defined (CMake does it)"
#endif

/* Emit sym: the file's bytes plus a NUL, and sym_end just before the NUL. */
#define KF_EMBED(sym, path)                                                   \
    __asm__(".section .rodata\n"                                              \
            ".balign 16\n" #sym ":\n"                                         \
            ".incbin \"" KFARM_SOURCE_DIR "/" path "\"\n" #sym "_end:\n"      \
            ".byte 0\n"                                                       \
            ".previous\n");                                                   \
    extern const char sym[], sym##_end[]

KF_EMBED(kf_emb_schema_001, "schema/001_init.sql");
KF_EMBED(kf_emb_schema_002, "schema/002_llm.sql");
KF_EMBED(kf_emb_schema_003, "schema/003_trust.sql");
KF_EMBED(kf_emb_schema_004, "schema/004_operator.sql");
KF_EMBED(kf_emb_schema_005, "schema/005_dispatch.sql");
KF_EMBED(kf_emb_schema_006, "schema/006_counts.sql");
KF_EMBED(kf_emb_schema_007, "schema/007_cover.sql");
KF_EMBED(kf_emb_schema_008, "schema/008_queue_next.sql");
KF_EMBED(kf_emb_schema_009, "schema/009_eval_target.sql");
KF_EMBED(kf_emb_schema_010, "schema/010_status.sql");
KF_EMBED(kf_emb_schema_011, "schema/011_proposal_counts.sql");
KF_EMBED(kf_emb_schema_012, "schema/012_eval_fk.sql");
KF_EMBED(kf_emb_schema_013, "schema/013_dispute_peers.sql");
KF_EMBED(kf_emb_schema_014, "schema/014_job_entries.sql");
KF_EMBED(kf_emb_schema_015, "schema/015_job_keys.sql");
KF_EMBED(kf_emb_schema_016, "schema/016_final_token.sql");
KF_EMBED(kf_emb_schema_017, "schema/017_delete_paths.sql");
KF_EMBED(kf_emb_schema_018, "schema/018_lease_beats.sql");

/* The dashboard, with its vendored libraries (tools/dashboard-vendor). */
KF_EMBED(kf_emb_dash_0, "dashboard_static/index.html");
KF_EMBED(kf_emb_dash_1, "dashboard_static/app.js");
KF_EMBED(kf_emb_dash_2, "dashboard_static/style.css");
KF_EMBED(kf_emb_dash_3, "dashboard_static/vendor/VERSIONS");
KF_EMBED(kf_emb_dash_4, "dashboard_static/vendor/diff.min.js");
KF_EMBED(kf_emb_dash_5, "dashboard_static/vendor/diff2html.min.css");
KF_EMBED(kf_emb_dash_6, "dashboard_static/vendor/diff2html.min.js");
KF_EMBED(kf_emb_dash_7, "dashboard_static/vendor/highlight.min.js");
KF_EMBED(kf_emb_dash_8, "dashboard_static/vendor/hljs-github-dark.min.css");
KF_EMBED(kf_emb_dash_9, "dashboard_static/vendor/hljs-github.min.css");
KF_EMBED(kf_emb_dash_10, "dashboard_static/vendor/uPlot.iife.min.js");
KF_EMBED(kf_emb_dash_11, "dashboard_static/vendor/uPlot.min.css");
KF_EMBED(kf_emb_dash_12, "dashboard_static/vendor/licenses/diff2html.LICENSE");
KF_EMBED(kf_emb_dash_13, "dashboard_static/vendor/licenses/highlight.js.LICENSE");
KF_EMBED(kf_emb_dash_14, "dashboard_static/vendor/licenses/jsdiff.LICENSE");
KF_EMBED(kf_emb_dash_15, "dashboard_static/vendor/licenses/uplot.LICENSE");

/* Copy up to max entries of a table into out; lengths are link-time
 * differences, computed here (no mutable state). */
static int fill(const char *const *names, const char *const *starts, const char *const *ends,
                int count, kf_embedded_file *out, int max)
{
    for (int i = 0; i < count && i < max; i++) {
        out[i].name = names[i];
        out[i].data = starts[i];
        out[i].len = (size_t)(ends[i] - starts[i]);
    }
    return count;
}

int kf_db_embedded_schema(kf_embedded_file *out, int max)
{
    static const char *const names[] = { "001_init.sql", "002_llm.sql", "003_trust.sql", "004_operator.sql",
                                         "005_dispatch.sql", "006_counts.sql", "007_cover.sql",
                                         "008_queue_next.sql", "009_eval_target.sql", "010_status.sql",
                                         "011_proposal_counts.sql", "012_eval_fk.sql",
                                         "013_dispute_peers.sql", "014_job_entries.sql",
                                         "015_job_keys.sql", "016_final_token.sql",
                                         "017_delete_paths.sql", "018_lease_beats.sql" };
    static const char *const starts[] = { kf_emb_schema_001, kf_emb_schema_002, kf_emb_schema_003,
                                          kf_emb_schema_004, kf_emb_schema_005, kf_emb_schema_006,
                                          kf_emb_schema_007, kf_emb_schema_008, kf_emb_schema_009,
                                          kf_emb_schema_010, kf_emb_schema_011, kf_emb_schema_012,
                                          kf_emb_schema_013, kf_emb_schema_014, kf_emb_schema_015,
                                          kf_emb_schema_016, kf_emb_schema_017, kf_emb_schema_018 };
    static const char *const ends[] = { kf_emb_schema_001_end, kf_emb_schema_002_end,
                                        kf_emb_schema_003_end, kf_emb_schema_004_end, kf_emb_schema_005_end,
                                        kf_emb_schema_006_end, kf_emb_schema_007_end, kf_emb_schema_008_end,
                                        kf_emb_schema_009_end, kf_emb_schema_010_end,
                                        kf_emb_schema_011_end, kf_emb_schema_012_end,
                                        kf_emb_schema_013_end, kf_emb_schema_014_end,
                                        kf_emb_schema_015_end, kf_emb_schema_016_end,
                                        kf_emb_schema_017_end, kf_emb_schema_018_end };
    return fill(names, starts, ends, (int)(sizeof(names) / sizeof(names[0])), out, max);
}

int kf_db_embedded_dashboard(kf_embedded_file *out, int max)
{
    static const char *const names[] = { "index.html",
        "app.js",
        "style.css",
        "vendor/VERSIONS",
        "vendor/diff.min.js",
        "vendor/diff2html.min.css",
        "vendor/diff2html.min.js",
        "vendor/highlight.min.js",
        "vendor/hljs-github-dark.min.css",
        "vendor/hljs-github.min.css",
        "vendor/uPlot.iife.min.js",
        "vendor/uPlot.min.css",
        "vendor/licenses/diff2html.LICENSE",
        "vendor/licenses/highlight.js.LICENSE",
        "vendor/licenses/jsdiff.LICENSE",
        "vendor/licenses/uplot.LICENSE" };
    static const char *const starts[] = { kf_emb_dash_0, kf_emb_dash_1, kf_emb_dash_2, kf_emb_dash_3, kf_emb_dash_4, kf_emb_dash_5, kf_emb_dash_6, kf_emb_dash_7, kf_emb_dash_8, kf_emb_dash_9, kf_emb_dash_10, kf_emb_dash_11, kf_emb_dash_12, kf_emb_dash_13, kf_emb_dash_14, kf_emb_dash_15 };
    static const char *const ends[] = { kf_emb_dash_0_end, kf_emb_dash_1_end, kf_emb_dash_2_end, kf_emb_dash_3_end, kf_emb_dash_4_end, kf_emb_dash_5_end, kf_emb_dash_6_end, kf_emb_dash_7_end, kf_emb_dash_8_end, kf_emb_dash_9_end, kf_emb_dash_10_end, kf_emb_dash_11_end, kf_emb_dash_12_end, kf_emb_dash_13_end, kf_emb_dash_14_end, kf_emb_dash_15_end };
    return fill(names, starts, ends, (int)(sizeof(names) / sizeof(names[0])), out, max);
}

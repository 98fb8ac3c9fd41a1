/*
 * prompt.h -- prompts for LLM-written candidates and reading the replies
 * (prefix kf_prompt_).
 *
 * Design. kf_prompt_build assembles, from the database alone, everything a
 * model needs to propose a child of one candidate:
 *
 *   system: the role, the output contract (one fenced code block, the ABI
 *           entry point, `// kfarm:tune` for parameters), the rules;
 *   user:   1. the task: math definition, tensors, sizes, shape sets,
 *              forbidden symbols, backend;
 *           2. the kernel ABI header, verbatim;
 *           3. hardware notes of each target class's architecture
 *              (docs/hardware/, embedded: hwnotes.c);
 *           4. passages retrieved from the campaign's reference documents
 *              (PostgreSQL full-text search over doc_chunks, ranked against
 *              the task and the parent's errors) -- manuals only, the farm
 *              never puts example kernels into a prompt;
 *           5. the parent's source, the tunable values the farm chose, and
 *              its feedback per target: verdict, detail, timings, speedup,
 *              profile/bound from the metrics, compile log (truncated);
 *           6. a summary of recent failures in the campaign;
 *           7. the engineers' hints (kfarm hint add).
 *
 * Long pieces are truncated to fixed budgets (kf_prompt_opts) so a prompt
 * stays well inside any model's context.
 *
 * Replies: kf_prompt_extract_code takes the longest complete fenced block
 * (``` c / cuda / cpp / cu / no language; ties: the last); a reply cut off
 * (finish_reason "length") counts only if such a complete block exists.
 * Sources are deduplicated by kf_prompt_norm_sha256: comments removed,
 * whitespace collapsed (line breaks kept only after preprocessor lines).
 */
#ifndef KF_PROMPT_H
#define KF_PROMPT_H

#include <stddef.h>
#include <stdint.h>
#include "db.h"

typedef struct {
    int docs_limit;          /* retrieved passages (default 4) */
    size_t docs_chars;       /* total characters of passages (default 6000) */
    int failures_limit;      /* recent failures listed (default 6) */
    size_t log_chars;        /* compile log / error text per evaluation (default 2000) */
    size_t source_chars;     /* parent source (default 60000) */
    int max_variants;        /* tunable combinations the farm will try (for the text) */
} kf_prompt_opts;

/* Fill opts with the defaults. */
void kf_prompt_opts_default(kf_prompt_opts *o);

/* Build the prompt for a child of candidate parent_id in campaign
 * campaign_id. *system and *user are malloc'ed (caller frees). Runs only
 * SELECTs (safe inside the caller's transaction). Returns 0, or -1 with
 * reason (unknown campaign/candidate, database error). */
int kf_prompt_build(kf_db *db, int64_t campaign_id, int64_t parent_id,
                    const kf_prompt_opts *opts, char **system, char **user,
                    char *err, size_t errlen);

/* A copy of reply without the reasoning blocks of reasoning models
 * (<think>...</think>, <thinking>, <reasoning>; an unclosed block runs to
 * the end; text before a lone closing tag is reasoning too). malloc'ed;
 * NULL when out of memory. */
char *kf_prompt_strip_reasoning(const char *reply);

/* The code of a reply (reasoning blocks removed first: a draft in a
 * <think> block is never the kernel): malloc'ed source, or NULL with a one-line reason
 * ("no code block in the reply", "reply cut off (finish_reason=length)",
 * "the code does not define kf_entry"). finish_reason may be NULL. */
char *kf_prompt_extract_code(const char *reply, const char *finish_reason,
                             char *reason, size_t reasonlen);

/* Normalized source (comments removed, whitespace collapsed): malloc'ed, or
 * NULL when out of memory. */
char *kf_prompt_normalize(const char *src);

/* SHA-256 (hex) of kf_prompt_normalize(src). Returns 0, or -1 (no memory). */
int kf_prompt_norm_sha256(const char *src, char out[65]);

/* Hardware note for an architecture ("sm_86", "sm_90a", "cpu"), or NULL
 * when unknown. Static text (hwnotes.c). */
const char *kf_prompt_hw_note(const char *arch);

/* The kernel ABI header text (abi/kf_abi.h). */
const char *kf_prompt_abi_text(void);

/* Store reference document `doc` (UTF-8 text, NUL-terminated; the buffer
 * is used as scratch and restored) for campaign_id's prompts: cut into
 * chunks of about 1500 characters on paragraph or line breaks (never inside
 * a UTF-8 sequence), replacing a document of that name, in one transaction.
 * Returns the number of chunks, or -1 with the database's message. */
int kf_prompt_doc_add(kf_db *db, int64_t campaign_id, const char *doc, char *text, char *err, size_t errlen);

/* Add an engineer's hint to campaign_id's next prompts; *id receives its id.
 * Returns 0, or -1 with the database's message. */
int kf_prompt_hint_add(kf_db *db, int64_t campaign_id, const char *text, int64_t *id, char *err, size_t errlen);

#endif

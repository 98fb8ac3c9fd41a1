/*
 * strategy_llm.h -- the LLM strategies (loop, beam, parallel), human review
 * and human submissions (prefix kf_strategy_).
 *
 * Design. A campaign advances in *rounds*. Round 0 evaluates the seed (its
 * `// kfarm:tune` variants when it declares any). Each later round is a set
 * of proposal slots (campaign, round, slot), each asking the model for a
 * child of one parent:
 *
 *   loop      children (default 1) slots, all children of the best candidate
 *             so far: a faster child becomes the new best, a slower or
 *             broken one is dropped (the next round starts again from the
 *             best: "roll back");
 *   beam      beam_width x children slots: the beam_width best distinct
 *             sources each get `children` children;
 *   parallel  `lineages` independent lineages, each with its own best and
 *             its own temperature/seed; slot i continues lineage i.
 *
 * One step (coordinator tick, under the campaign's row lock, one
 * transaction; only database work, never the model):
 *   1. turn answered proposals into candidates: extract the code
 *      (prompt.h), expand tunables into variants (at most tune_max_variants,
 *      like the tune strategy), skip sources already evaluated (normalized
 *      hash + defines), insert candidates and one job per target -- or, with
 *      "review": true, park the proposal in state review until a person
 *      approves it (approved proposals are materialized the same way);
 *   2. when the current round is complete (no open proposal, no unfinished
 *      job), score it: candidate score = mean speedup over the targets,
 *      only when every target's final verdict is ok; update best/plateau;
 *   3. stop when a budget or goal is reached (max_candidates, max_rounds,
 *      max_tokens, max_hours, target_speedup, plateau_rounds), else record
 *      the next round's proposals with their prompts (state requested).
 * The LLM service (llm_service.h) answers requested proposals outside the
 * lock; a restarted coordinator re-issues only the unanswered ones, and the
 * unique (campaign, round, slot) key makes duplicate slots impossible.
 */
#ifndef KF_STRATEGY_LLM_H
#define KF_STRATEGY_LLM_H

#include <stddef.h>
#include <stdint.h>
#include "db.h"
#include "strategy.h"

extern const kf_strategy kf_strategy_loop;
extern const kf_strategy kf_strategy_beam;
extern const kf_strategy kf_strategy_parallel;

/* Check a campaign config (JSON object text) for an LLM strategy ("loop",
 * "beam", "parallel"): the llm object, budgets, review. Returns 0, or -1
 * with a reason naming the field. */
int kf_strategy_llm_check_config(const char *strategy, const char *config_json,
                                 char *err, size_t errlen);

/* Materialize proposal proposal_id (state answered-with-code or approved):
 * candidates (tunable variants) + jobs, proposal -> done, or failed with a
 * reason (duplicate source, budget exhausted, bad tunables). Runs in the
 * caller's transaction; the caller should hold the campaign row lock
 * (SELECT ... FOR UPDATE) so budgets are counted consistently. Returns 0,
 * or -1 with reason on database errors. */
int kf_strategy_llm_materialize(kf_db *db, int64_t proposal_id, char *err, size_t errlen);

/* A person's kernel for campaign_id (`kfarm candidate submit`), in one
 * transaction: a 'human' proposal, already approved, materialized into a
 * candidate with a job per target (dedup and lineage as for the model's).
 * parent: candidate id text or NULL. *proposal_id receives the proposal.
 * Returns 0 (the proposal may still have failed, e.g. as a duplicate: read
 * its state), -2 when refused, with a reason that reads after "campaign
 * NAME " ("is done: ...", "has no candidate N ..."), -1 with the database's
 * message. */
int kf_strategy_llm_submit(kf_db *db, int64_t campaign_id, const char *parent, const char *code,
                           int64_t *proposal_id, char *err, size_t errlen);

/* A person's review of proposal `id` of campaign_id (`kfarm review`), in
 * one transaction under the campaign's row lock: approve (materialized at
 * once, as kf_strategy_llm_materialize) or reject with `note` (may be NULL).
 * Returns 1 when the proposal was waiting for review and changed, 0 when it
 * was not waiting (unknown, or already reviewed), -1 with the database's
 * message. */
int kf_strategy_llm_review(kf_db *db, int64_t campaign_id, int64_t id, int approve, const char *note,
                           char *err, size_t errlen);

#endif

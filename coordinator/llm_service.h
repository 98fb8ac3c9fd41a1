/*
 * llm_service.h -- answers requested proposals in a background thread
 * (prefix kf_llm_service_).
 *
 * Design. Strategies never call the model: they record proposals (state
 * requested, prompt included) in PostgreSQL. The service, started by the
 * coordinator's main, owns its own database connection and an LLM client
 * (llm.h) in one dedicated thread:
 *
 *   every ~0.3 s: claim requested proposals of running campaigns
 *                 (FOR UPDATE SKIP LOCKED; claimed_until = now() + the
 *                 campaign's per-attempt timeout + 10 s, renewed every 3 s
 *                 while the request is in flight), up to
 *                 each campaign's llm.max_in_flight and 64 overall, and
 *                 submit them;
 *   meanwhile:    drive the transfers (curl multi, many in flight);
 *   on a reply:   store reply, finish_reason, usage, attempts, latency and
 *                 state answered -- or failed with the reason (HTTP error
 *                 after retries, timeout, key variable unset).
 *
 * A coordinator killed mid-request leaves its proposals requested; their
 * claims lapse and the next coordinator re-issues exactly those. A reply
 * that cannot be stored (database down) is kept in memory and stored once
 * the database is back.
 */
#ifndef KF_LLM_SERVICE_H
#define KF_LLM_SERVICE_H

#include <stddef.h>

typedef struct kf_llm_service kf_llm_service;

/* Connect (conninfo NULL: $KFARM_DB) and start the thread. Returns the
 * service, or NULL with reason. */
kf_llm_service *kf_llm_service_start(const char *conninfo, char *err, size_t errlen);

/* Stop the thread (in-flight requests are abandoned; their proposals stay
 * requested and are re-issued later) and free. NULL is fine. */
void kf_llm_service_stop(kf_llm_service *s);

#endif

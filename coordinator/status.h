/*
 * status.h -- a campaign's status as `kfarm campaign status` shows it
 * (prefix kf_status_).
 *
 * Design. The status is written to a FILE, not to stdout, so the same code
 * answers in two places: the `kfarm` CLI (its own database connection,
 * writing to its stdout) and the coordinator's operator socket
 * (operator.h: a warm connection, writing to a memory stream that travels
 * back to the CLI). Both therefore print the same bytes for the same rows.
 *
 * What is read: the campaign row with its counts (campaign_counts, schema
 * 006/011: nothing sums a long campaign's results), the best per target
 * and its ties (bests.h, at most 100 ties read, in the text and the JSON
 * alike), the blockers (health.h)
 * and, for LLM strategies, the search's progress (proposals, tokens, the
 * budget closest to running out).
 */
#ifndef KF_STATUS_H
#define KF_STATUS_H

#include <stddef.h>
#include <stdio.h>

#include "db.h"

/* The version of what kf_status_write prints: raise it with any change to
 * the text or the JSON, so that a coordinator of the old format is not
 * asked for the new one over its operator socket (operator.h). */
#define KF_STATUS_FORMAT 1

/* Write campaign `name`'s status to out: the text report (tty: out is a
 * terminal, so the budget is drawn as a bar) or, with json, one object
 * {"name", "id", "progress", "blockers", "bests"} and a newline, where
 * bests is kf_bests_top's with at most 100 ties per target.
 * Returns 0; 1 when there is no such campaign; -1 on a database error.
 * On 1 and -1 err holds the reason ("no campaign 'x' (see kfarm campaign
 * list)"); part of the report may already be written. */
int kf_status_write(kf_db *db, const char *name, int json, int tty, FILE *out, char *err, size_t errlen);

/* Format a jsonb defines object's text ({"A": "1", "B": "2"}) as "A=1 B=2"
 * into buf (cap bytes, cut at a whole define); "-" when NULL or empty.
 * Returns buf. */
const char *kf_status_defines(const char *json, char *buf, size_t cap);

#endif

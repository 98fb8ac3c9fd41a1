/*
 * export.h -- the static dashboard export (prefix kf_export_).
 *
 * Design. `kfarm export --out DIR` and the coordinator's --export-dir write a
 * static site that opens from file:// (browsers refuse fetch() of local
 * files) and works on any static web server, with no network:
 *
 *     DIR/index.html, app.js, style.css,   from dashboard_static/ (embedded
 *         vendor/ (uPlot, highlight.js,     in the binary; $KFARM_DASHBOARD_DIR
 *         diff2html, jsdiff + licences)     overrides it for development)
 *     DIR/data/index.js                     campaign summaries and the fleet
 *     DIR/data/c<ID>.js                     one campaign: settings, counts,
 *                                           bests, proposals, its chunks
 *     DIR/data/c<ID>/r<N>.js                the campaign's tables (candidates,
 *                                           results, attempts) for candidates
 *                                           N*8192 .. N*8192+8191 by id
 *     DIR/data/c<ID>/b<N>.js                candidates N*128 .. N*128+127 by id:
 *                                           source, logs, metrics, prompt
 *     DIR/data/c<ID>/p<N>.js                proposals N*32 .. N*32+31 that made
 *                                           no candidate: prompt, reply, why
 *
 * Each data file is a script calling kfarmData("KEY", {...}) (KEY: index,
 * c<ID>, c<ID>/r<N>, c<ID>/b<N>, c<ID>/p<N>), which the page loads on demand
 * by inserting a <script> element: a page parses only what it shows, so a
 * campaign of 100,000 candidates opens as fast as the list of campaigns
 * allows.
 *
 * The JSON is built by PostgreSQL (json_build_object/json_agg), so it is
 * always valid JSON with correct escaping. Every file is written to a
 * temporary name and renamed into place, a campaign's file after its
 * chunks, and the index last: a browser reloading during a periodic export
 * never sees a half-written file, nor a campaign file naming a chunk not
 * yet written.
 */
#ifndef KF_EXPORT_H
#define KF_EXPORT_H

#include <stddef.h>
#include "db.h"

/* Write the whole site into dir (created if missing), reading it in one
 * snapshot on db and, when one can be opened, a second connection to the
 * same database. Returns 0, or -1 with reason (database, file system). */
int kf_export_site(kf_db *db, const char *dir, char *err, size_t errlen);

/* As kf_export_site, but rewrite only the campaign, chunk and candidate
 * files with something newer than since (a timestamptz text, as the
 * periodic export keeps it; NULL: everything), and files missing from dir.
 * Returns 0, or -1 with reason. */
int kf_export_site_since(kf_db *db, const char *dir, const char *since, char *err, size_t errlen);

/* The noise the dashboard shows for one final result, from its metrics
 * (JSON text): the largest candidate cv and the smallest and largest
 * speedup over the timed shapes (metrics.timing.shapes[i].candidate.cv and
 * .speedup, numbers or numeric strings), and whether metrics.timing.flags
 * holds "noisy" (as jsonb's ? operator: an element, a key or the string
 * itself). has_cv / has_lo: 0 when no shape gave one. */
typedef struct {
    int has_cv, has_lo;
    double cv, lo, hi;
    int noisy;
} kf_export_noise;

/* Fill *out from metrics[0..len). A scanner that reads only the members
 * named above, as jsonb's text output writes them (200-1,000 bytes per
 * result; a full parse of each was a fifth of a full export's CPU at
 * 1,000,000 evaluations); on anything it does not expect (an escape in a
 * key or in a string it compares, a non-ASCII byte, a number with an
 * exponent or too many digits, nesting deeper than 512, a syntax error)
 * it gives what kf_export_metrics_noise_parsed gives. Never fails;
 * returns 1 when the scanner read it, 0 when the full parse did. */
int kf_export_metrics_noise(const char *metrics, size_t len, kf_export_noise *out);

/* The same by a full parse (jansson): the reference the scanner is tested
 * against, and its fallback. Invalid JSON gives no noise. */
void kf_export_metrics_noise_parsed(const char *metrics, size_t len, kf_export_noise *out);

/* The coordinator's periodic export (--export-dir): a thread with its own
 * database connection re-exports the site every interval_s seconds and once
 * more when stopped, rewriting only the campaign, chunk and candidate files
 * that changed since its previous export, so a large export (seconds for 100k candidates) never
 * delays job dispatch, heartbeats or results on the coordinator's loop.
 * Start returns NULL with reason when the connection or thread cannot be
 * made; export errors are logged and retried at the next interval. */
typedef struct kf_export_service kf_export_service;
kf_export_service *kf_export_service_start(const char *conninfo, const char *dir, double interval_s,
                                           char *err, size_t errlen);
/* Stop the thread after one final export; frees the service. NULL is a no-op. */
void kf_export_service_stop(kf_export_service *s);

#endif

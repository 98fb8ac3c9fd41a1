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

/*
 * export.h -- the static dashboard export (prefix kf_export_).
 *
 * Design. `kfarm export --out DIR` and the coordinator's --export-dir write a
 * self-contained static site that opens from file:// (browsers refuse fetch()
 * of local files, so the data is a script, data.js, assigning the global
 * window.KFARM_DATA) and works on any static host:
 *
 *     DIR/index.html, app.js, style.css   from dashboard_static/ (embedded
 *                                          in the binary; $KFARM_DASHBOARD_DIR
 *                                          overrides it for development)
 *     DIR/data.js                          campaigns, candidates, results,
 *                                          verdict counts, best per target,
 *                                          workers
 *
 * The JSON is built by PostgreSQL (json_build_object/json_agg) in one query
 * per campaign, so it is always valid JSON with correct escaping. Every file
 * is written to a temporary name and renamed into place: a browser reloading
 * during a periodic export never sees a half-written file.
 */
#ifndef KF_EXPORT_H
#define KF_EXPORT_H

#include <stddef.h>
#include "db.h"

/* Build the text of data.js ("window.KFARM_DATA = {...};\n"). Returns a
 * malloc'ed string (caller frees), or NULL with reason. */
char *kf_export_data_js(kf_db *db, char *err, size_t errlen);

/* Write the whole site into dir (created if missing). Returns 0, or -1 with
 * reason (database, file system). */
int kf_export_site(kf_db *db, const char *dir, char *err, size_t errlen);

/* The coordinator's periodic export (--export-dir): a thread with its own
 * database connection re-exports the site every interval_s seconds and once
 * more when stopped, so a large export (seconds for 100k candidates) never
 * delays job dispatch, heartbeats or results on the coordinator's loop.
 * Start returns NULL with reason when the connection or thread cannot be
 * made; export errors are logged and retried at the next interval. */
typedef struct kf_export_service kf_export_service;
kf_export_service *kf_export_service_start(const char *conninfo, const char *dir, double interval_s,
                                           char *err, size_t errlen);
/* Stop the thread after one final export; frees the service. NULL is a no-op. */
void kf_export_service_stop(kf_export_service *s);

#endif

-- tests/recount.sql -- rebuild campaign_counts (schema/006_counts.sql) from
-- the rows. The coordinator adds counts in every statement that inserts
-- evaluations or candidates; fixtures and benchmarks that write rows
-- straight into the tables (tests/browser/synth.sql, ...) run this after,
-- so that the readers of the counts (`kfarm campaign status`, the export's
-- campaign list) see what the rows say. Candidates and proposals keep their
-- triggers' counts (schema 006, 011); evaluations are counted here.
BEGIN;
LOCK TABLE campaign_counts IN SHARE ROW EXCLUSIVE MODE;
DELETE FROM campaign_counts WHERE what = 'evaluation';
INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n)
SELECT j.campaign_id, 'evaluation', j.target, j.purpose, e.verdict, e.is_final, count(*)
FROM evaluations e JOIN jobs j ON j.id = e.job_id
GROUP BY j.campaign_id, j.target, j.purpose, e.verdict, e.is_final;
COMMIT;

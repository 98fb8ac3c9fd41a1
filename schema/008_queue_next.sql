-- 008_queue_next.sql -- the queue read from a floor (issue 13: dispatch at
-- fleet scale).
--
-- A lease read a campaign's queue from the head of jobs_queued_campaign
-- (campaign, purpose <> 'verify', id). Every job leased since the last
-- VACUUM leaves a dead entry there (its row is no longer queued), and every
-- lease stepped over all of them: 1.3 ms and 44 index pages after 16,000
-- leases, growing until autovacuum reaches the table. The coordinator now
-- remembers, per serving thread and campaign, the largest id it leased (its
-- floor, coordinator/queue.c kf_queue_floors) and reads the non-verification
-- jobs from there: an index on (campaign, id) makes the floor a start key.
-- Verification jobs (few) have their own index and are read first, as
-- before. jobs_queued_campaign stays for the counts that read it.
CREATE INDEX jobs_queued_next ON jobs (campaign_id, id) WHERE state = 'queued' AND purpose <> 'verify';
CREATE INDEX jobs_queued_verify ON jobs (campaign_id, id) WHERE state = 'queued' AND purpose = 'verify';

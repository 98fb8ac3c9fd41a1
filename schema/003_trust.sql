-- 003_trust.sql -- fleet trust: per-worker credentials, secret lease tokens,
-- persistent replay counters, redundant verification of winners, outage-aware
-- lease expiry. docs/architecture.md ("Trust model") explains the whole.

-- One row per identity the operator enrolled (`kfarm worker add NAME`). The
-- worker holds a random secret; the coordinator keeps only the key derived
-- from it (HKDF-SHA256, proto/kf_wire.h), from which both message keys derive.
CREATE TABLE worker_credentials (
    name          text PRIMARY KEY,
    mac_key       bytea NOT NULL CHECK (length(mac_key) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,                 -- set: every message is refused
    msg_counter   bigint NOT NULL DEFAULT 0,   -- highest message counter accepted (replay)
    instance_id   text,                        -- hex id of the process serving it now
    instance_host text,
    instance_seen timestamptz                  -- last message from that process
);

-- The 128-bit random secret of the current lease, handed only to its holder;
-- fencing_token stays the public, monotonic lease number.
ALTER TABLE jobs ADD COLUMN lease_token bytea;

-- Verification jobs re-evaluate a result that would become its campaign's
-- best on a target, on another worker when one serves the target.
ALTER TABLE jobs ADD COLUMN purpose text NOT NULL DEFAULT 'eval'
    CHECK (purpose IN ('eval', 'verify'));
ALTER TABLE jobs ADD COLUMN verifies bigint REFERENCES evaluations(id) ON DELETE CASCADE;
ALTER TABLE jobs ADD COLUMN avoid_worker text;    -- prefer any other worker
ALTER TABLE jobs ADD COLUMN not_before timestamptz;
ALTER TABLE jobs DROP CONSTRAINT jobs_candidate_id_target_key;
CREATE UNIQUE INDEX jobs_one_eval ON jobs(candidate_id, target) WHERE purpose = 'eval';
-- a candidate's jobs of any purpose (the dropped constraint's index served
-- this; without it every per-candidate lookup scans the jobs table)
CREATE INDEX jobs_candidate ON jobs(candidate_id);
CREATE UNIQUE INDEX jobs_one_verify ON jobs(verifies) WHERE purpose = 'verify';

-- The confirmation state of a result (the final `ok` evaluation of an eval
-- job). Only 'confirmed' results are called best without a caveat:
--   none         never needed a second opinion (was not a best when it came)
--   pending      would be best: a verification job is queued or running
--   confirmed    a second evaluation agreed within the measured noise
--   disputed     a second evaluation disagreed (or failed): never named best
--   inconclusive the verification itself could not run (infra failures)
ALTER TABLE evaluations ADD COLUMN confirmation text NOT NULL DEFAULT 'none'
    CHECK (confirmation IN ('none', 'pending', 'confirmed', 'disputed', 'inconclusive'));
ALTER TABLE evaluations ADD COLUMN confirmed_by bigint REFERENCES evaluations(id);
ALTER TABLE evaluations ADD COLUMN confirmed_by_worker text;
ALTER TABLE evaluations ADD COLUMN confirmation_detail text;
ALTER TABLE evaluations ADD COLUMN confirmed_at timestamptz;

-- Reputation: verifications agreed with / disputed by another worker.
ALTER TABLE workers ADD COLUMN agreements integer NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN disputes integer NOT NULL DEFAULT 0;

-- The coordinator's pulse: written every second by the serving loop. A gap
-- means the coordinator or the database was away; leases are extended by the
-- gap before the reaper runs, so an outage is never charged as an attempt.
CREATE TABLE coordinator_pulse (
    id         integer PRIMARY KEY CHECK (id = 1),
    last_alive timestamptz NOT NULL
);
INSERT INTO coordinator_pulse VALUES (1, now());

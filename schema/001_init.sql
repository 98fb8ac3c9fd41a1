-- 001_init.sql -- the initial kernelfarm schema.
--
-- Applied by `kfarm db migrate` and at coordinator start (coordinator/db.c):
-- each migration runs in its own transaction under an advisory lock and is
-- recorded in schema_version, so re-running is a no-op. Migrations are
-- append-only: never edit a released file, add 002_*.sql instead.
--
-- Model: a task (spec + files) is evaluated by campaigns; a campaign owns
-- candidates (sources + tunable values); each candidate gets one job per
-- target routing class; each lease of a job that reaches a verdict (or is
-- lost) leaves one evaluation row, and exactly one evaluation per finished
-- job is final (partial unique index).

CREATE TABLE tasks (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL,
    spec        jsonb NOT NULL,                 -- task.json, parsed
    spec_text   text NOT NULL,                  -- task.json as written (sent to workers)
    files       jsonb NOT NULL DEFAULT '{}',    -- {filename: content}
    sha256      text NOT NULL UNIQUE,           -- over spec_text and files
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE campaigns (
    id             bigserial PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    task_id        bigint NOT NULL REFERENCES tasks(id),
    strategy       text NOT NULL CHECK (strategy IN ('tune', 'loop', 'beam', 'parallel')),
    config         jsonb NOT NULL DEFAULT '{}',
    strategy_state jsonb NOT NULL DEFAULT '{}', -- the strategy's own progress
    targets        text[] NOT NULL CHECK (cardinality(targets) > 0),
    max_candidates integer,                     -- NULL: no budget
    max_attempts   integer NOT NULL DEFAULT 3,  -- per job
    state          text NOT NULL DEFAULT 'created'
                   CHECK (state IN ('created', 'running', 'paused', 'done')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz,
    finished_at    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE candidates (
    id          bigserial PRIMARY KEY,
    campaign_id bigint NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    source      text NOT NULL,
    sha256      text NOT NULL,                  -- of source
    defines     jsonb NOT NULL DEFAULT '{}',    -- {NAME: "value"}
    parent_id   bigint REFERENCES candidates(id),
    proposer    text NOT NULL CHECK (proposer IN ('seed', 'tune', 'llm', 'human')),
    note        text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (campaign_id, sha256, defines)
);
CREATE INDEX candidates_parent ON candidates(parent_id);

CREATE SEQUENCE fencing_seq;                    -- one token per lease, fleet-wide

CREATE TABLE jobs (
    id             bigserial PRIMARY KEY,
    candidate_id   bigint NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
    campaign_id    bigint NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    target         text NOT NULL,               -- routing class
    state          text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'done')),
    lease_deadline timestamptz,
    fencing_token  bigint NOT NULL DEFAULT 0,   -- current lease; 0 = never leased
    attempts       integer NOT NULL DEFAULT 0,  -- leases handed out
    lost           integer NOT NULL DEFAULT 0,  -- leases that expired
    max_attempts   integer NOT NULL DEFAULT 3,
    worker_id      text,                        -- current/last holder
    seed           bigint,                      -- input RNG seed; NULL = job id
    created_at     timestamptz NOT NULL DEFAULT now(),
    leased_at      timestamptz,
    finished_at    timestamptz,
    UNIQUE (candidate_id, target)
);
CREATE INDEX jobs_queued ON jobs(target, id) WHERE state = 'queued';
CREATE INDEX jobs_leased ON jobs(lease_deadline) WHERE state = 'leased';
CREATE INDEX jobs_campaign ON jobs(campaign_id, state);

CREATE TABLE evaluations (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    candidate_id  bigint NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    worker_id     text,
    fencing_token bigint,
    reported      boolean NOT NULL DEFAULT true, -- false: recorded by the coordinator (lease lost)
    verdict       text NOT NULL CHECK (verdict IN ('ok', 'compile_error', 'load_error',
                      'runtime_error', 'timeout', 'incorrect', 'rejected_cheat',
                      'unsupported', 'infra_error')),
    detail        text,
    metrics       jsonb,
    candidate_us  double precision,
    baseline_us   double precision,
    speedup       double precision,
    compile_log   text,
    is_final      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX evaluations_one_final ON evaluations(job_id) WHERE is_final;
CREATE UNIQUE INDEX evaluations_job_token ON evaluations(job_id, fencing_token);
CREATE INDEX evaluations_candidate ON evaluations(candidate_id);

CREATE TABLE workers (
    id           text PRIMARY KEY,
    hostname     text,
    backend      text,
    devices      jsonb NOT NULL DEFAULT '[]',
    classes      text[] NOT NULL DEFAULT '{}',
    driver_version  text,
    toolkit_version text,
    slots        integer NOT NULL DEFAULT 1,
    registered   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now(),
    quarantined  boolean NOT NULL DEFAULT false,
    infra_errors integer NOT NULL DEFAULT 0,    -- consecutive infra_error results
    jobs_done    bigint NOT NULL DEFAULT 0
);

-- +goose Up
-- The merchant's fire drill (services/drill): a run of the real purchase path against a scratch
-- copy of a sale. The copy is a row of sales marked drill_of (the sale it copies), which no
-- listing, page or answer shows (store/postgres.go, services/catalog) and which is deleted, with
-- its items and orders, when the drill ends. drills keeps each drill's settings, progress and
-- result (the page shows the last one after a reload); the partial unique index lets one drill
-- run at a time on the whole deployment, whichever instance starts it.
ALTER TABLE sales ADD COLUMN drill_of BIGINT REFERENCES sales (id);
CREATE INDEX sales_drill_of ON sales (drill_of) WHERE drill_of IS NOT NULL;

CREATE TABLE drills (
    id             BIGSERIAL   PRIMARY KEY,
    sale_id        BIGINT      NOT NULL REFERENCES sales (id),
    merchant_id    BIGINT      NOT NULL,
    copy_sale_id   BIGINT,     -- the scratch copy while it exists (no foreign key: it is deleted)
    phase          TEXT        NOT NULL CHECK (phase IN ('preparing', 'running', 'draining', 'cleaning', 'done', 'failed')),
    shoppers       INT         NOT NULL CHECK (shoppers BETWEEN 1 AND 50000),
    seconds        INT         NOT NULL CHECK (seconds BETWEEN 1 AND 30),
    expected_crowd BIGINT      NOT NULL CHECK (expected_crowd > 0),
    crowd_source   TEXT        NOT NULL,
    instance       TEXT        NOT NULL,
    started_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at    TIMESTAMPTZ,
    sent           INT         NOT NULL DEFAULT 0,
    answered       INT         NOT NULL DEFAULT 0,
    result         JSONB,
    failure        TEXT,
    CHECK ((finished_at IS NULL) = (phase NOT IN ('done', 'failed')))
);
CREATE UNIQUE INDEX drills_one_running ON drills ((true)) WHERE finished_at IS NULL;
CREATE INDEX drills_sale ON drills (sale_id, id DESC);

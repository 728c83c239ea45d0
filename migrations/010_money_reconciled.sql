-- +goose Up
-- Every payment is an order or a refund.
--
-- A payment that names an order but is not that order's own (another checkout session, a Payment
-- Link on the same account, another amount or currency, a second payment of a paid order) is a
-- conflict: it pays nothing, it is recorded here and refunded by the keeper. One row per provider
-- session (a session is paid at most once). No foreign key to orders: a drill's scratch orders are
-- deleted, and a conflict may name an order that does not exist.
CREATE TABLE payment_conflicts (
    provider       TEXT        NOT NULL,
    session_id     TEXT        NOT NULL,
    order_id       UUID,
    sale_id        BIGINT,
    payment_id     TEXT,       -- the provider's payment (PaymentIntent); NULL when nothing was taken
    amount_cents   BIGINT      NOT NULL CHECK (amount_cents >= 0),
    currency       TEXT        NOT NULL,
    reason         TEXT        NOT NULL,
    -- refund_due: to be refunded; refunded: the provider accepted the refund; refund_failed: the
    -- provider refused it for good (refund_failure says why: the merchant acts); nothing_taken: no
    -- money moved (a 100% promotion code), nothing to give back.
    state          TEXT        NOT NULL CHECK (state IN ('refund_due', 'refunded', 'refund_failed', 'nothing_taken')),
    refund_id      TEXT,
    refund_failure TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    refunded_at    TIMESTAMPTZ,
    PRIMARY KEY (provider, session_id)
);
CREATE INDEX payment_conflicts_sale ON payment_conflicts (sale_id);
CREATE INDEX payment_conflicts_due ON payment_conflicts (created_at) WHERE state = 'refund_due';

-- A refund the provider refused for good is final: recorded with its reason, shown to the
-- merchant, never asked again.
ALTER TABLE orders ADD COLUMN refund_failure TEXT;
DROP INDEX orders_refund_due;
CREATE INDEX orders_refund_due ON orders (id) WHERE payment_status = 'refunded' AND refund_id IS NULL AND refund_failure IS NULL;

-- A free item's order (price 0) needs no payment: it is confirmed at once, payment_status 'free'.
ALTER TABLE orders DROP CONSTRAINT orders_payment_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_payment_status_check
    CHECK (payment_status IN ('none', 'awaiting', 'paid', 'refunded', 'free')) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_payment_status_check;
ALTER TABLE orders DROP CONSTRAINT orders_payment_matches_status;
ALTER TABLE orders ADD CONSTRAINT orders_payment_matches_status
    CHECK ((payment_status IN ('paid', 'free')) = (status = 'PAID')) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_payment_matches_status;

-- The payments reconciler (services/payments) asks the provider about checkouts whose outcome
-- may not have reached us: checked_at is when one was last claimed for that (one instance at a
-- time), verified that the provider's word on a closed one has been applied.
ALTER TABLE checkouts ADD COLUMN checked_at TIMESTAMPTZ, ADD COLUMN verified BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX checkouts_to_verify ON checkouts (created_at) WHERE NOT verified;

-- A refund the provider accepted may still fail later (Stripe: pending, then failed): the
-- reconciler asks about each refund until the provider calls it final. refund_final is set once
-- it succeeded, or failed (refund_failure then says why).
ALTER TABLE orders ADD COLUMN refund_final BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE payment_conflicts ADD COLUMN refund_final BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX orders_refund_unconfirmed ON orders (refunded_at) WHERE refund_id IS NOT NULL AND NOT refund_final;

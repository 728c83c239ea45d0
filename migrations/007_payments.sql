-- +goose Up
-- Payments (issue 20). An order keeps the price it was bought at (the item's price may be edited
-- during the sale; the shopper pays what they were shown), set by the writer's insert; older
-- orders read the item's.
ALTER TABLE orders ADD COLUMN unit_price_cents BIGINT CHECK (unit_price_cents >= 0);
UPDATE orders o SET unit_price_cents = (SELECT price_cents FROM items i WHERE i.id = o.item_id);
-- An order's payment: none, awaiting (a checkout is open), paid, or refunded
-- (money that arrived for an order that was no longer PENDING: it goes back, refund_id is set once
-- the provider accepted the refund). The provider's event ids are kept so each is applied once, and
-- each order has at most one hosted checkout.
ALTER TABLE orders
    ADD COLUMN payment_status   TEXT NOT NULL DEFAULT 'none' CHECK (payment_status IN ('none', 'awaiting', 'paid', 'refunded')),
    ADD COLUMN payment_provider TEXT,
    ADD COLUMN payment_id       TEXT,
    ADD COLUMN paid_cents       BIGINT CHECK (paid_cents >= 0),
    ADD COLUMN refund_id        TEXT,
    ADD COLUMN refunded_at      TIMESTAMPTZ;
-- Orders paid before payments were recorded were paid through the simulated provider.
UPDATE orders o SET payment_status = 'paid', payment_provider = 'simulated', payment_id = 'sim_pi_' || o.id::text,
    paid_cents = unit_price_cents
    WHERE status = 'PAID';
-- A paid order is PAID; a refunded one is not (the refund is the shop giving back a payment it
-- could not honour).
-- (NOT VALID, then validated: the check of the existing rows takes no lock that stops writes.)
ALTER TABLE orders ADD CONSTRAINT orders_payment_matches_status
    CHECK ((payment_status = 'paid') = (status = 'PAID')) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_payment_matches_status;
-- The refunds still to be made.
CREATE INDEX orders_refund_due ON orders (id) WHERE payment_status = 'refunded' AND refund_id IS NULL;

CREATE TABLE checkouts (
    order_id   UUID        PRIMARY KEY REFERENCES orders (id),
    attempt    INT         NOT NULL DEFAULT 0, -- a checkout closed unpaid while the order is PENDING is opened anew
    provider   TEXT        NOT NULL,
    session_id TEXT        NOT NULL,
    url        TEXT        NOT NULL,
    state      TEXT        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'expired', 'complete')),
    expires_at TIMESTAMPTZ NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    closed_at  TIMESTAMPTZ
);
-- The checkouts still open: the ones of orders no longer PENDING are expired through the provider.
CREATE INDEX checkouts_open ON checkouts (created_at) WHERE state = 'open';

CREATE TABLE payment_events (
    provider    TEXT        NOT NULL,
    event_id    TEXT        NOT NULL,
    order_id    UUID,
    kind        TEXT        NOT NULL,
    outcome     TEXT        NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id)
);

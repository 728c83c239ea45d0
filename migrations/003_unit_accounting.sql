-- +goose Up
-- Every unit accounted for: per-sale payment window and purchase limit, the order's sale, the
-- reservation counter Postgres knows (to detect a Redis that lost recent writes), the epoch of the
-- last rebuild of a sale's Redis state, and the durable record of units to give back to Redis.

ALTER TABLE sales
    ADD COLUMN payment_window_seconds INT  NOT NULL DEFAULT 600 CHECK (payment_window_seconds BETWEEN 1 AND 86400),
    ADD COLUMN purchase_limit         TEXT NOT NULL DEFAULT 'per-sale' CHECK (purchase_limit IN ('per-sale', 'per-item')),
    ADD COLUMN currency               TEXT NOT NULL DEFAULT 'CNY' CHECK (currency ~ '^[A-Z]{3}$'),
    -- bumped each time the sale's Redis state is rebuilt from Postgres; a rebuild with a lower
    -- epoch than the one Redis holds is refused, so a slow instance cannot load an old snapshot
    ADD COLUMN redis_epoch            BIGINT NOT NULL DEFAULT 0;

-- Sales created before this migration keep the rule they were sold under: one per shopper and item.
UPDATE sales SET purchase_limit = 'per-item';

-- The highest reservation sequence number (Redis's per-sale counter) of the orders written for
-- each item. A Redis whose counter is below it has lost reservations: it is rebuilt.
ALTER TABLE items ADD COLUMN max_seq BIGINT NOT NULL DEFAULT 0;

ALTER TABLE orders
    ADD COLUMN sale_id  BIGINT,
    ADD COLUMN seq      BIGINT NOT NULL DEFAULT 0,
    -- true when the sale allows one unit per shopper in the whole sale
    ADD COLUMN per_sale BOOLEAN NOT NULL DEFAULT false;
UPDATE orders o SET sale_id = i.sale_id FROM items i WHERE i.id = o.item_id;
ALTER TABLE orders ALTER COLUMN sale_id SET NOT NULL;
ALTER TABLE orders ADD CONSTRAINT orders_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id);

-- The last line of defence of "one unit per shopper per sale".
CREATE UNIQUE INDEX orders_live_sale_user ON orders (sale_id, user_id)
    WHERE per_sale AND status IN ('PENDING', 'PAID');
-- "My orders", newest first (by when the unit was reserved).
CREATE INDEX orders_user_reserved ON orders (user_id, reserved_at DESC, id DESC);
CREATE INDEX orders_sale_status ON orders (sale_id, status);

-- Units that went back in Postgres (an order EXPIRED or CANCELLED) and must go back in Redis. The
-- row is written in the transaction that changes the order, and deleted only once Redis has the
-- unit back, so a Redis that is down delays the return and never loses it.
CREATE TABLE stock_returns (
    order_id   UUID        PRIMARY KEY REFERENCES orders (id),
    sale_id    BIGINT      NOT NULL,
    item_id    BIGINT      NOT NULL,
    user_id    BIGINT      NOT NULL,
    reason     TEXT        NOT NULL CHECK (reason IN ('EXPIRED', 'CANCELLED')),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX stock_returns_sale ON stock_returns (sale_id);

-- +goose Up
-- The schema of flashsale. Postgres is the source of truth: the CHECK on items and the partial
-- unique index on orders are the last line of defence against oversell and double purchase.

CREATE TABLE users (
    id            BIGSERIAL PRIMARY KEY,
    username      TEXT        NOT NULL UNIQUE,
    password_hash TEXT        NOT NULL,
    role          TEXT        NOT NULL CHECK (role IN ('shopper', 'merchant')),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE sales (
    id          BIGSERIAL PRIMARY KEY,
    merchant_id BIGINT      NOT NULL,
    name        TEXT        NOT NULL,
    starts_at   TIMESTAMPTZ NOT NULL,
    ends_at     TIMESTAMPTZ NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at)
);
CREATE INDEX sales_ends_at ON sales (ends_at);
CREATE INDEX sales_merchant ON sales (merchant_id);

CREATE TABLE items (
    id          BIGSERIAL PRIMARY KEY,
    sale_id     BIGINT  NOT NULL REFERENCES sales (id),
    position    INT     NOT NULL,
    name        TEXT    NOT NULL,
    price_cents BIGINT  NOT NULL CHECK (price_cents >= 0),
    quantity    INT     NOT NULL CHECK (quantity >= 0),
    sold        INT     NOT NULL DEFAULT 0 CHECK (sold >= 0),
    CHECK (sold <= quantity)
);
CREATE INDEX items_sale ON items (sale_id, position);

-- orders.user_id has no foreign key: the identity provider may be external (the JWT is the identity).
CREATE TABLE orders (
    id          UUID        PRIMARY KEY,
    item_id     BIGINT      NOT NULL REFERENCES items (id),
    user_id     BIGINT      NOT NULL,
    status      TEXT        NOT NULL CHECK (status IN ('PENDING', 'PAID', 'EXPIRED', 'CANCELLED', 'FAILED')),
    reserved_at TIMESTAMPTZ NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    pay_by      TIMESTAMPTZ NOT NULL,
    paid_at     TIMESTAMPTZ,
    failure     TEXT
);
-- One live order per shopper and item.
CREATE UNIQUE INDEX orders_live_item_user ON orders (item_id, user_id) WHERE status IN ('PENDING', 'PAID');
CREATE INDEX orders_item_status ON orders (item_id, status);
CREATE INDEX orders_pending_pay_by ON orders (pay_by) WHERE status = 'PENDING';

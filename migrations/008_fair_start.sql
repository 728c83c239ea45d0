-- +goose Up
-- Fair start: a sale may hold a draw for its first fair_start_millis after the start. A purchase
-- in that window is an entry (an order row ENTERED, with a random rank the shopper cannot
-- influence, holding no unit); when the window has closed and every acknowledged entry is
-- written, one transaction gives the units to the best ranks (PENDING) and ends the others
-- (NOT_SELECTED). The entries and their ranks stay: the draw's record.
ALTER TABLE sales
    ADD COLUMN fair_start_millis INT NOT NULL DEFAULT 0 CHECK (fair_start_millis BETWEEN 0 AND 10000),
    ADD COLUMN draw_closed_at    TIMESTAMPTZ,
    ADD COLUMN draw_entries      INT,
    ADD COLUMN draw_winners      INT;
-- Units left of each item right after its draw: what Redis holds for it then, whichever instance
-- applies the draw and however late.
ALTER TABLE items ADD COLUMN draw_left INT;
ALTER TABLE orders ADD COLUMN draw_rank BIGINT;
-- (NOT VALID, then validated: the check of the existing rows takes no lock that stops writes.)
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('PENDING', 'PAID', 'EXPIRED', 'CANCELLED', 'FAILED', 'ENTERED', 'NOT_SELECTED')) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_status_check;
-- An entry is one of a draw, ranked; a draw's entries are read by sale and rank.
ALTER TABLE orders ADD CONSTRAINT orders_entry_ranked
    CHECK (status NOT IN ('ENTERED', 'NOT_SELECTED') OR draw_rank IS NOT NULL) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_entry_ranked;
CREATE INDEX orders_draw ON orders (sale_id, draw_rank, id) WHERE draw_rank IS NOT NULL;

-- +goose Down
DROP INDEX orders_draw;
ALTER TABLE orders DROP CONSTRAINT orders_entry_ranked;
DELETE FROM orders WHERE status IN ('ENTERED', 'NOT_SELECTED');
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('PENDING', 'PAID', 'EXPIRED', 'CANCELLED', 'FAILED'));
ALTER TABLE orders DROP COLUMN draw_rank;
ALTER TABLE items DROP COLUMN draw_left;
ALTER TABLE sales DROP COLUMN draw_winners, DROP COLUMN draw_entries, DROP COLUMN draw_closed_at, DROP COLUMN fair_start_millis;

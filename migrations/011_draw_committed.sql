-- +goose Up
-- A draw anyone can check (commit, then reveal). Each sale has a secret seed of 32 random bytes,
-- drawn by the server when the sale is created (existing sales get one here, from two random
-- UUIDs); a sale with a fair start publishes its SHA-256 before its window opens and the seed once
-- its draw is decided. An entry's draw key is HMAC-SHA256 of its order id under the seed, written
-- by the decision: within an item the smallest keys win. draw_rank is from now on the entry's
-- place among its item's ranked entries (1 is the best), 0 until the draw is decided and for an
-- entry the draw did not rank (a second entry of the same shopper, or one written after the
-- decision).
ALTER TABLE sales
    ADD COLUMN draw_seed BYTEA NOT NULL
        DEFAULT decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')
        CHECK (length(draw_seed) = 32),
    -- pauses while the draw was undecided (an emergency stop the draw's record shows)
    ADD COLUMN draw_pauses INT NOT NULL DEFAULT 0,
    -- the queue's last position once the window had passed on every shard: every entry answered
    -- in the window was published at or before it, so the draw waits for the writers to pass it
    ADD COLUMN draw_queue_pos BIGINT;
ALTER TABLE orders ADD COLUMN draw_key BYTEA;

-- +goose Down
ALTER TABLE orders DROP COLUMN draw_key;
ALTER TABLE sales DROP COLUMN draw_queue_pos, DROP COLUMN draw_pauses, DROP COLUMN draw_seed;

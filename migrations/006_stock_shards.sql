-- +goose Up
-- A hot sale's stock split into K shards on different Redis Cluster slots (issue 12): K is fixed
-- per sale at its creation (1: every key under {sale:S}, as before), and the highest reservation
-- seq Postgres holds is kept per item and shard, so each shard's counter is checked against its
-- own (the keeper's partial-loss detection). Rows are written only for sales of K > 1, by the
-- writer's statement, under the item's row lock it already holds.
ALTER TABLE sales ADD COLUMN stock_shards INT NOT NULL DEFAULT 1 CHECK (stock_shards BETWEEN 1 AND 64);
CREATE TABLE item_shard_seqs (
    item_id BIGINT NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    shard   INT NOT NULL CHECK (shard BETWEEN 0 AND 63),
    max_seq BIGINT NOT NULL,
    PRIMARY KEY (item_id, shard)
);

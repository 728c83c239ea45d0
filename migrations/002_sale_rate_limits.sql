-- +goose Up
-- Per-sale rate limits (requests per second per shopper and per client IP); NULL = the defaults.
ALTER TABLE sales
    ADD COLUMN user_rate_per_sec INT CHECK (user_rate_per_sec > 0),
    ADD COLUMN ip_rate_per_sec   INT CHECK (ip_rate_per_sec > 0);

-- +goose Up
-- Usernames are compared case-insensitively: "Alice" and "alice" are one account. Lookups use
-- lower(username), which this index serves and keeps unique. Accounts that already differ only
-- by case stop the migration with their names, for an operator to rename one of each pair
-- (`UPDATE users SET username = ... WHERE id = ...`) before starting again.
-- +goose StatementBegin
DO $$
DECLARE
    dups TEXT;
BEGIN
    SELECT string_agg(names, '; ') INTO dups FROM (
        SELECT string_agg(username || ' (id ' || id || ')', ', ' ORDER BY id) AS names
        FROM users GROUP BY lower(username) HAVING count(*) > 1
    ) d;
    IF dups IS NOT NULL THEN
        RAISE EXCEPTION 'usernames that differ only by case must be renamed first: %', dups;
    END IF;
END $$;
-- +goose StatementEnd

CREATE UNIQUE INDEX users_username_lower ON users (lower(username));

-- +goose Up
-- Sale administration (issue 9): a sale's description, an item's image, and whether the merchant
-- paused the sale (purchases and purchase tokens answer 503 PAUSED; Redis's meta carries it too).
ALTER TABLE sales ADD COLUMN description TEXT CHECK (char_length(description) <= 2000);
ALTER TABLE sales ADD COLUMN paused BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE items ADD COLUMN image_url TEXT CHECK (image_url LIKE 'https://%');

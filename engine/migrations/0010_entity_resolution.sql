-- Entity resolution (engine/retain/resolve.py) looks up names that are no entity's canonical
-- name among aliases too: with this index the alias branch of its candidate search is an
-- index probe (BitmapOr with the unique name and the trigram indexes) instead of a scan of
-- the bank's entities per name.
CREATE INDEX entities_aliases ON entities USING gin (aliases_normalized);

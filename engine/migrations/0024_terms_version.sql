-- Which tokeniser wrote a memory's BM25 terms (engine/text.py TERMS_VERSION). Memories
-- stored before this migration are 0: their Chinese postings may be character bigrams, which
-- the word + character queries of today miss. `engram retokenize` rewrites them
-- (engine/retokenize.py). The default is the current version, so every path that inserts a
-- memory (retain, consolidation, imports) records it without naming the column; adding a
-- column with a constant default does not rewrite the table.
ALTER TABLE memory_units ADD COLUMN terms_version smallint NOT NULL DEFAULT 0;
ALTER TABLE memory_units ALTER COLUMN terms_version SET DEFAULT 1;

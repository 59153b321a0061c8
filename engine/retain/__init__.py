"""The write path: chunk, extract, embed, resolve entities, link, upsert by document."""

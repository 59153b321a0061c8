"""Bulk import of chat history and notes: format detection, parsers, staging and export."""

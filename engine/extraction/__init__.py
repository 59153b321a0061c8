"""Fact extraction providers: `llm`, `local` and `none`."""

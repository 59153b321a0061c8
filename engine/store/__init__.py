"""SQL over asyncpg, one module per table family."""

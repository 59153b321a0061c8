"""The memory itself: plain async Python over asyncpg. Never imports temporalio or starlette."""

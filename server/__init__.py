"""The Starlette HTTP server: Hindsight v1 wire format, recall straight from PostgreSQL."""

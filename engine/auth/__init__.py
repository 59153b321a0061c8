"""API keys, the principal a request acts as, and the audit trail (docs/security.md)."""

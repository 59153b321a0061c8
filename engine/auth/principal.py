"""Who a request acts as, and what that lets it do. Handlers, the MCP server and the console
read it from `request.state.principal` and ask `allows(bank_id, scope)`."""

from __future__ import annotations

from dataclasses import dataclass

# Each scope includes the ones before it.
SCOPES = ("read", "write", "admin")


def scope_rank(scope: str) -> int:
    return SCOPES.index(scope)


@dataclass(frozen=True)
class Principal:
    """An authenticated key, or `OPEN` when authentication is off.

    `bank_id` None: every bank (only admin keys, and the open principal, have it).
    """

    key_id: str | None
    bank_id: str | None
    scope: str
    rate_limit_per_minute: int | None = None

    def allows(self, bank_id: str | None, scope: str) -> bool:
        """`scope` on `bank_id`; `bank_id` None asks for something above banks (listing
        keys, every bank's audit), which only an all-banks key has."""
        if scope_rank(self.scope) < scope_rank(scope):
            return False
        return self.bank_id is None or self.bank_id == bank_id

    def sees(self, bank_id: str) -> bool:
        """Whether the bank exists for this principal at all: other banks are "not found"."""
        return self.bank_id is None or self.bank_id == bank_id


OPEN = Principal(key_id=None, bank_id=None, scope="admin")

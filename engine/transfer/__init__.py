"""Moving a bank's data between banks and machines: transfer archives (docs/transfer.md)."""

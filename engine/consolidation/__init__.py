"""Consolidation: turning facts into observations (beliefs with evidence and history)."""

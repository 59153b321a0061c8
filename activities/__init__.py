"""Temporal activities: thin adapters from one payload to one engine call."""

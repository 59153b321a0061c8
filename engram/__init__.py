"""The `engram` command: the stack supervisor and the command-line client."""

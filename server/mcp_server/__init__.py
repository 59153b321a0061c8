"""The MCP server: Engram's memory as tools for agents (Streamable HTTP at /mcp/, stdio via
`engram mcp`). Tools call the v1 routes, so they share their validation and errors."""

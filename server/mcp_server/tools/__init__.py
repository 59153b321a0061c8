"""The MCP tools, by area: each module holds its tools' arguments, run functions and specs
(`spec.py` says what a tool is made of). `TOOLS` is the order `tools/list` answers in."""

from __future__ import annotations

from server.mcp_server.tools import (
    banks,
    directives,
    documents,
    memories,
    mental_models,
    operations,
    retain_recall,
    tags,
)
from server.mcp_server.tools.spec import ToolSpec

TOOLS: tuple[ToolSpec, ...] = (
    *retain_recall.TOOLS,
    *banks.TOOLS,
    *memories.TOOLS,
    *documents.TOOLS,
    *operations.TOOLS,
    *tags.TOOLS,
    *directives.TOOLS,
    *mental_models.TOOLS,
)

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}

"""The ChatGPT data export (`conversations.json`).

Each conversation is a tree (`mapping`: node id → {message, parent, children}) because
edited prompts and regenerated answers branch it; what the user last saw is the path from
the root to `current_node`, so that path is imported and abandoned branches are not.
System and tool messages, hidden messages and non-text parts (code runs, images, browsing
results) are internal to ChatGPT and left out. Each conversation is one document whose id is
the conversation's own id; its title travels as item metadata.
"""

from __future__ import annotations

from typing import Any

from engine.imports.jsonl import Draft, role_speaker
from engine.imports.model import ImportOptions, RecordError, SourceFile
from engine.imports.records import Message, RecordInvalid, as_text, group_messages, parse_timestamp

_TEXT_TYPES = ("text", "multimodal_text")
_SKIPPED_ROLES = ("system", "tool")


def looks_like_chatgpt(data: object) -> bool:
    return (
        isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "mapping" in data[0]
    )


def _path(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise RecordInvalid("has no mapping")
    node_id = conversation.get("current_node")
    if node_id is None:
        # Old exports lack current_node: follow the last child from the root instead.
        roots = [n for n in mapping.values() if isinstance(n, dict) and n.get("parent") is None]
        if not roots:
            raise RecordInvalid("has no current_node and no root")
        path = [roots[0]]
        while path[-1].get("children"):
            child = mapping.get(path[-1]["children"][-1])
            if not isinstance(child, dict) or len(path) > len(mapping):
                raise RecordInvalid("has a broken children list")
            path.append(child)
        return path
    path = []
    seen: set[str] = set()
    while node_id is not None:
        if not isinstance(node_id, str) or node_id in seen:
            raise RecordInvalid(f"has a broken parent chain at {node_id!r}")
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise RecordInvalid(f"names node {node_id!r}, which is not in its mapping")
        seen.add(node_id)
        path.append(node)
        node_id = node.get("parent")
    path.reverse()
    return path


def _message(
    node: dict[str, Any], fallback: object, options: ImportOptions, title: str
) -> Message | None:
    message = node.get("message")
    if not isinstance(message, dict):
        return None
    author = message.get("author") or {}
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str) or role in _SKIPPED_ROLES:
        return None
    meta = message.get("metadata") or {}
    if isinstance(meta, dict) and meta.get("is_visually_hidden_from_conversation"):
        return None
    content = message.get("content") or {}
    if not isinstance(content, dict) or content.get("content_type") not in _TEXT_TYPES:
        return None
    text = as_text(content.get("parts"))
    if text is None or not text.strip():
        return None
    stamp = message.get("create_time")
    return Message(
        speaker=role_speaker(role, options),
        text=text.strip(),
        timestamp=parse_timestamp(stamp if stamp is not None else fallback),
        metadata={"title": title} if title else {},
    )


def parse_chatgpt(
    source: SourceFile, data: object, options: ImportOptions, errors: list[RecordError]
) -> list[Draft]:
    where = source.name or "content"
    if not isinstance(data, list):
        errors.append(RecordError(where, "a ChatGPT export is a JSON array of conversations"))
        return []
    drafts: list[Draft] = []
    for index, conversation in enumerate(data, start=1):
        position = f"{where} conversation {index}"
        try:
            if not isinstance(conversation, dict):
                raise RecordInvalid("is not a JSON object")
            title = conversation.get("title")
            title = title if isinstance(title, str) else ""
            if title:
                position += f" ({title[:60]!r})"
            raw_id = conversation.get("conversation_id") or conversation.get("id")
            if not isinstance(raw_id, str) or not raw_id:
                raise RecordInvalid("has no id")
            fallback = conversation.get("create_time")
            messages = [
                m
                for node in _path(conversation)
                if (m := _message(node, fallback, options, title)) is not None
            ]
        except RecordInvalid as exc:
            errors.append(RecordError(position, str(exc)))
            continue
        if messages:
            drafts.append(Draft(raw_id, group_messages(messages), len(messages)))
    return drafts

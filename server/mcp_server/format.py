"""Tool results as compact text a model reads well: one line per item, dates and ids kept."""

from __future__ import annotations

from typing import Any


def day(value: Any) -> str:
    return str(value)[:10] if value else "undated"


def fact_line(item: dict[str, Any]) -> str:
    kind = item.get("type") or item.get("fact_type") or "fact"
    when = item.get("occurred_start") or item.get("mentioned_at") or item.get("date")
    tags = item.get("tags") or []
    tag_text = f" tags={','.join(tags)}" if tags else ""
    return f"- [{item['id']}] ({kind}, {day(when)}{tag_text}) {item.get('text', '')}"


def recall_text(body: dict[str, Any], query: str) -> str:
    results = body.get("results", [])
    if not results:
        return f"No memories found for {query!r}."
    lines = [f"{len(results)} memories for {query!r}:"]
    lines.extend(fact_line(r) for r in results)
    return "\n".join(lines)


def reflect_text(body: dict[str, Any]) -> str:
    text = str(body.get("text", "")).strip()
    memories = (body.get("based_on") or {}).get("memories") or []
    if not memories:
        return text
    sources = "\n".join(fact_line(m) for m in memories[:20])
    return f"{text}\n\nBased on:\n{sources}"


def page_text(body: dict[str, Any], what: str, line: Any, items_key: str = "items") -> str:
    items = body.get(items_key, [])
    if not items:
        return f"No {what}."
    head = f"{len(items)} of {body.get('total', len(items))} {what}"
    if body.get("offset"):
        head += f" (from offset {body['offset']})"
    return "\n".join([head + ":", *(line(i) for i in items)])


def bank_line(bank: dict[str, Any]) -> str:
    mission = f" — {bank['mission']}" if bank.get("mission") else ""
    return f"- {bank['bank_id']}: {bank.get('name') or '(no name)'}{mission}"


def bank_text(bank: dict[str, Any]) -> str:
    d = bank.get("disposition") or {}
    return (
        f"Bank {bank['bank_id']}: {bank.get('name') or '(no name)'}\n"
        f"mission: {bank.get('mission') or '(none)'}\n"
        f"disposition: skepticism {d.get('skepticism')}, literalism {d.get('literalism')}, "
        f"empathy {d.get('empathy')}\ncreated {day(bank.get('created_at'))}"
    )


def stats_text(stats: dict[str, Any]) -> str:
    by_type = stats.get("nodes_by_fact_type") or {}
    types = ", ".join(f"{k} {v}" for k, v in sorted(by_type.items())) or "none"
    return (
        f"Bank {stats['bank_id']}: {stats.get('total_nodes', 0)} memories ({types}), "
        f"{stats.get('total_documents', 0)} documents, {stats.get('total_entities', 0)} "
        f"entities, {stats.get('total_links', 0)} links; operations pending "
        f"{stats.get('pending_operations', 0)}, failed {stats.get('failed_operations', 0)}"
    )


def document_line(doc: dict[str, Any]) -> str:
    return (
        f"- {doc['id']} ({doc.get('memory_unit_count', 0)} memories, "
        f"{doc.get('text_length', 0)} chars, updated {day(doc.get('updated_at'))})"
    )


def document_text(doc: dict[str, Any]) -> str:
    text = str(doc.get("original_text") or "")
    shown = text if len(text) <= 4000 else text[:4000] + f"… ({len(text)} chars in all)"
    memories = doc.get("memories") or []
    lines = [
        f"Document {doc['id']} ({doc.get('memory_unit_count', 0)} memories, "
        f"updated {day(doc.get('updated_at'))}):",
        shown,
    ]
    if memories:
        lines.append("Memories:")
        lines.extend(fact_line(m) for m in memories[:50])
    return "\n".join(lines)


def operation_line(op: dict[str, Any]) -> str:
    error = f" — {op['error_message']}" if op.get("error_message") else ""
    created = op.get("created_at")
    return f"- {op['id']}: {op.get('task_type')} {op.get('status')} (created {created}){error}"


def memory_text(memory: dict[str, Any]) -> str:
    lines = [fact_line(memory)]
    if memory.get("context"):
        lines.append(f"context: {memory['context']}")
    if memory.get("entities"):
        entities = memory["entities"]
        names = ", ".join(entities) if isinstance(entities, list) else str(entities)
        lines.append(f"entities: {names}")
    if memory.get("document_id"):
        lines.append(f"document: {memory['document_id']}")
    return "\n".join(lines)


def mental_model_line(model: dict[str, Any]) -> str:
    refreshed = model.get("last_refreshed_at")
    state = f"refreshed {day(refreshed)}" if refreshed else "not refreshed yet"
    return f"- {model['id']}: {model.get('name')} ({state}) — query: {model.get('source_query')}"


def mental_model_text(model: dict[str, Any]) -> str:
    content = model.get("content") or "(no content yet: it fills after its first refresh)"
    return f"{mental_model_line(model)}\n{content}"


def directive_line(d: dict[str, Any]) -> str:
    state = "" if d.get("is_active", True) else ", inactive"
    tags = f", tags={','.join(d['tags'])}" if d.get("tags") else ""
    return f"- {d['id']} (priority {d.get('priority', 0)}{state}{tags}) {d['name']}: {d['content']}"

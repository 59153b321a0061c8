"""One entry point: uploaded files in, documents and record errors out.

The format is detected per file unless the caller names it: a JSON array whose objects
have a `mapping` is a ChatGPT export; JSON with `conversation` objects holding `session_<n>`
lists is LoCoMo-style; other JSON arrays, and files whose first line is a JSON object, are
records (JSON Lines); anything else is plain text or Markdown, one document per file.
Documents of the same id from several files are merged in file order.
"""

from __future__ import annotations

from engine.errors import InvalidInput
from engine.imports.chatgpt import looks_like_chatgpt, parse_chatgpt
from engine.imports.jsonl import Draft, decode_lines, loads, parse_records
from engine.imports.locomo import looks_like_locomo, parse_locomo
from engine.imports.model import (
    ImportDocument,
    ImportFormat,
    ImportOptions,
    ParsedImport,
    RecordError,
    SourceFile,
    fallback_document_id,
)
from engine.imports.records import split_document, text_items

_BOM_AND_SPACE = "\ufeff \t\r\n"
_NOT_JSON = object()


def _whole_json(source: SourceFile) -> object:
    text = source.content.lstrip(_BOM_AND_SPACE)
    if not text.startswith(("[", "{")):
        return _NOT_JSON
    try:
        return loads(text)
    except ValueError:
        return _NOT_JSON


def detect_format(source: SourceFile) -> ImportFormat:
    return _detect(source, _whole_json(source))


def _detect(source: SourceFile, data: object) -> ImportFormat:
    if data is not _NOT_JSON:
        if looks_like_chatgpt(data):
            return "chatgpt"
        if looks_like_locomo(data):
            return "locomo"
        return "jsonl"
    first_line = source.content.lstrip(_BOM_AND_SPACE).split("\n", 1)[0].strip()
    if first_line.startswith("{") or source.name.lower().endswith(".jsonl"):
        return "jsonl"
    return "text"


def _parse_file(
    source: SourceFile,
    fmt: ImportFormat,
    data: object,
    options: ImportOptions,
    errors: list[RecordError],
) -> list[Draft]:
    where = source.name or "content"
    if fmt == "text":
        if not source.content.strip():
            errors.append(RecordError(where, "is empty"))
            return []
        document_id = fallback_document_id(source, source.content)
        return [Draft(document_id, text_items(source.content, None), 1)]
    if fmt == "jsonl":
        if isinstance(data, list):
            records = ((f"{where} record {i}", v) for i, v in enumerate(data, start=1))
            return parse_records(source, records, options, errors)
        return parse_records(source, decode_lines(source, errors), options, errors)
    if data is _NOT_JSON:
        errors.append(RecordError(where, f"is not valid JSON, so not a {fmt} file"))
        return []
    if fmt == "chatgpt":
        return parse_chatgpt(source, data, options, errors)
    return parse_locomo(source, data, options, errors)


def parse_import(files: list[SourceFile], options: ImportOptions) -> ParsedImport:
    """Parse every file; with on_error="stop" the first bad record raises InvalidInput."""
    errors: list[RecordError] = []
    formats: list[str] = []
    merged: dict[str, list[Draft]] = {}
    for source in files:
        data = _whole_json(source) if source.content.strip() else _NOT_JSON
        fmt = options.format or _detect(source, data)
        if fmt not in formats:
            formats.append(fmt)
        before = len(errors)
        for draft in _parse_file(source, fmt, data, options, errors):
            merged.setdefault(draft.document_id, []).append(draft)
        if options.on_error == "stop" and len(errors) > before:
            raise InvalidInput("content", f"{errors[before]} (on_error=stop: nothing imported)")
    documents: list[ImportDocument] = []
    for document_id, drafts in merged.items():
        items = [item for draft in drafts for item in draft.items]
        documents += split_document(document_id, items, sum(d.records for d in drafts))
    return ParsedImport(formats, documents, errors)

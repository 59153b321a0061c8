"""Text out of an uploaded file: plain text and Markdown as they are, HTML without its markup,
PDF through pypdf (page text in order). Anything else is refused by name."""

from __future__ import annotations

import io
from html.parser import HTMLParser

from pypdf import PdfReader
from pypdf.errors import PdfReadError

from engine.errors import InvalidInput

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".text", ".csv", ".json", ".log")
HTML_SUFFIXES = (".html", ".htm")
KINDS = "text, Markdown, HTML or PDF"


class _HTMLText(HTMLParser):
    """Visible text, a line break after each block element; scripts and styles skipped."""

    BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def pdf_text(data: bytes, field: str) -> str:
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError) as exc:
        raise InvalidInput(field, f"is not a readable PDF ({exc})") from exc
    return "\n\n".join(p.strip() for p in pages if p.strip())


def _decode(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, f"is not UTF-8 text (byte {exc.start})") from exc


def file_text(filename: str, content_type: str, data: bytes, field: str) -> str:
    """The file's text; `field` names it in errors (e.g. `files[1]`)."""
    name = filename.lower()
    media = content_type.split(";", 1)[0].strip().lower()
    if name.endswith(".pdf") or media == "application/pdf":
        text = pdf_text(data, field)
    elif name.endswith(HTML_SUFFIXES) or media in ("text/html", "application/xhtml+xml"):
        text = html_text(_decode(data, field))
    elif name.endswith(TEXT_SUFFIXES) or media.startswith("text/") or media == "application/json":
        text = _decode(data, field)
    else:
        raise InvalidInput(field, f"{filename!r} is not {KINDS} ({media or 'no content type'})")
    if not text.strip():
        raise InvalidInput(field, f"{filename!r} holds no text")
    return text

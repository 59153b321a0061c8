"""One long document retained through the public API, synchronously: whether it is stored
and how long it takes. A text of short sentences makes the most facts for its length, the
case that found Temporal's payload and message limits and the upsert's timeouts
(docs/architecture.md, "What passes between the steps").

    .venv/bin/python -m bench.large_document --url http://127.0.0.1:8888 [--chars 990000]

Prints the request's status, its size, the facts, chunks and links it stored (or the error)
and the wall time. The default sentence is Chinese (3 bytes a character, ~9 characters a
fact); `--sentence` takes another.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import httpx

from bench.engram_api import API

SENTENCE = "我们今天去了公园。"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a running Engram, e.g. from `engram up`")
    parser.add_argument("--chars", type=int, default=990_000, help="the document's length")
    parser.add_argument("--sentence", default=SENTENCE, help="repeated to make the text")
    parser.add_argument("--bank", default="bench-large-document")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait")
    args = parser.parse_args(argv)
    text = args.sentence * (args.chars // len(args.sentence))
    body = {"items": [{"content": text, "document_id": f"large-{len(text)}"}]}
    size = len(json.dumps(body, ensure_ascii=False).encode())
    print(f"document: {len(text):,} characters, request {size / 1e6:.2f} MB")
    started = time.perf_counter()
    with httpx.Client(base_url=args.url, timeout=args.timeout) as client:
        response = client.post(f"{API}/{args.bank}/memories", json=body)
    seconds = time.perf_counter() - started
    answer = response.json()
    if response.is_success:
        print(
            f"stored: {answer['facts_added']:,} facts, {answer['chunks_added']:,} chunks, "
            f"{answer['links_added']:,} links in {seconds:.1f} s"
        )
        return 0
    print(f"HTTP {response.status_code} after {seconds:.1f} s: {answer.get('detail')}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""The payload key of this test session: the in-process clients use TEST_CONVERTER and every
process the tests start inherits ENGRAM_PAYLOAD_KEY (set by conftest), so all of them seal and
open Temporal payloads alike, as server, worker and CLI do in a stack."""

from __future__ import annotations

from workflows.converter import data_converter, decode_key, new_key_text

TEST_PAYLOAD_KEY = new_key_text()
TEST_CONVERTER = data_converter(decode_key(TEST_PAYLOAD_KEY, "TEST_PAYLOAD_KEY"))

"""The data converter shared by clients and workers: pydantic's payload converter (dataclasses
with datetimes and nested records round-trip exactly), every payload sealed with AES-GCM under
a key Engram holds, and failure messages moved into the sealed attributes. The Temporal server,
its database and its UI only ever see ciphertext (docs/security.md).

The key is ENGRAM_PAYLOAD_KEY (base64 of 32 bytes), else `payload.key` in ENGRAM_HOME, made
with mode 0600 on first use. Keys in ENGRAM_PAYLOAD_PREVIOUS_KEYS still decrypt, so a key can
be rotated while workflows sealed under the old one are still open. Payloads that carry no
seal (histories written before the codec) are read as they are.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import os
import secrets
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
)

from engine.errors import ConfigurationError
from engine.settings import Settings

ENCODING = b"binary/engram-aesgcm"
KEY_FILE = "payload.key"
KEY_BYTES = 32
NONCE_BYTES = 12


def key_id(key: bytes) -> bytes:
    """Names the key in each payload's metadata, so rotation knows which key opens it."""
    return hashlib.sha256(b"engram-payload-key:" + key).hexdigest()[:16].encode()


class PayloadDecryptionError(ValueError):
    pass


class AESGCMCodec(PayloadCodec):
    def __init__(self, key: bytes, previous: Sequence[bytes] = ()) -> None:
        self._current = key_id(key)
        self._keys = {key_id(k): AESGCM(k) for k in (*previous, key)}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        sealed = []
        aead = self._keys[self._current]
        for payload in payloads:
            nonce = secrets.token_bytes(NONCE_BYTES)
            data = aead.encrypt(nonce, payload.SerializeToString(), self._current)
            sealed.append(
                Payload(
                    metadata={"encoding": ENCODING, "encryption-key-id": self._current},
                    data=nonce + data,
                )
            )
        return sealed

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        opened = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                opened.append(payload)
                continue
            kid = payload.metadata.get("encryption-key-id", b"")
            aead = self._keys.get(kid)
            if aead is None:
                raise PayloadDecryptionError(
                    f"a payload is sealed with key {kid.decode(errors='replace')}, which this "
                    "process does not have (ENGRAM_PAYLOAD_KEY / ENGRAM_PAYLOAD_PREVIOUS_KEYS)"
                )
            nonce, data = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
            try:
                plain = aead.decrypt(nonce, data, kid)
            except InvalidTag as exc:
                raise PayloadDecryptionError("a sealed payload failed authentication") from exc
            opened.append(Payload.FromString(plain))
        return opened


# Payload types come from these packages, which workflows import passed through the sandbox:
# one class object per process, so one TypeAdapter serves every workflow run.
SHARED_PACKAGES = ("engine", "activities")
SHARED_MODULES = frozenset({"builtins", "datetime", "uuid", "decimal", "typing", "collections.abc"})


def _shared(hint: Any) -> bool:
    """Whether `hint` names the same types in every workflow run (so its adapter can be kept)."""
    if hint is Any or hint is None or isinstance(hint, str | int | bool):
        return True
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        module = hint.__module__
        return module in SHARED_MODULES or module.split(".")[0] in SHARED_PACKAGES
    origin = typing.get_origin(hint)
    if origin is None or not (
        origin in (typing.Union, types.UnionType, typing.Literal) or _shared(origin)
    ):
        return False
    return all(_shared(arg) for arg in typing.get_args(hint))


@functools.lru_cache(maxsize=1024)
def _adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


class _SharedAdapterJSON(PydanticJSONPlainPayloadConverter):
    """Pydantic's JSON converter with one adapter cache for the whole process.

    Temporal builds a payload converter for every workflow run, so the stock per-converter
    cache rebuilt each payload type's validator in each run's first activation: about 36 ms
    a type on a loaded 2-core host, over 2 s for a batch workflow's types — enough to trip the
    SDK's deadlock detector, whose interrupt can leave a workflow thread stuck and the worker's
    shutdown waiting on it for ever. Types defined inside a sandboxed workflow module differ in
    every run and keep the per-run cache (sharing them would keep each run's modules alive).
    """

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        hint = Any if type_hint is None else type_hint
        try:
            shared = _shared(hint)
            hash(hint)
        except TypeError:
            shared = False
        if not shared:
            return super().from_payload(payload, type_hint)
        return _adapter(hint).validate_json(payload.data)


class PayloadConverter(CompositePayloadConverter):
    """Temporal's default converters with JSON through pydantic (dataclasses with datetimes and
    nested records round-trip exactly)."""

    def __init__(self) -> None:
        json = _SharedAdapterJSON()
        super().__init__(
            *(
                json if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


def data_converter(key: bytes, previous: Sequence[bytes] = ()) -> DataConverter:
    return DataConverter(
        payload_converter_class=PayloadConverter,
        payload_codec=AESGCMCodec(key, previous),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


def decode_key(raw: str, name: str) -> bytes:
    try:
        key = base64.b64decode(raw.strip(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(f"{name} is not base64") from exc
    if len(key) != KEY_BYTES:
        raise ConfigurationError(f"{name} must be {KEY_BYTES} bytes, got {len(key)}")
    return key


def new_key_text() -> str:
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def load_payload_key(settings: Settings) -> bytes:
    """The configured key, else the one in ENGRAM_HOME, made (0600) by the first process that
    needs it; concurrent first starts agree through an atomic link."""
    if settings.security.payload_key:
        return decode_key(settings.security.payload_key, "ENGRAM_PAYLOAD_KEY")
    home = settings.home
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / KEY_FILE
    if not path.exists():
        _create_key_file(path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise ConfigurationError(f"{path} must be readable only by its owner (mode {mode:o})")
    return decode_key(path.read_text(), str(path))


def _create_key_file(path: Path) -> None:
    temp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(new_key_text() + "\n")
        with contextlib.suppress(FileExistsError):  # another process made it first: use it
            os.link(temp, path)
    finally:
        temp.unlink()


def converter_for(settings: Settings) -> DataConverter:
    previous = [
        decode_key(raw, "ENGRAM_PAYLOAD_PREVIOUS_KEYS")
        for raw in settings.security.payload_previous_keys
    ]
    return data_converter(load_payload_key(settings), previous)

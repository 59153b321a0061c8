"""Memory content never reaches Temporal in clear: a retained-then-deleted secret is found
neither in the dev server's SQLite file nor through its HTTP API, while a control string sent
without the codec is found by the same search (so the search can fail)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support.payload_key import TEST_CONVERTER
from support.serve import free_port
from support.waiting import until
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from engine.db import Pool
from engine.embedding import Embedder
from engine.settings import Settings
from engram.temporal_server import TemporalDevServer
from server.app import create_app
from server.services import Services
from worker.main import WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor
from workflows.converter import AESGCMCodec, PayloadDecryptionError, data_converter, new_key_text

BASE = "/v1/default/banks"


@pytest.fixture
def temporal_server(tmp_path: Path) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(
        tmp_path / "temporal.db", tmp_path / "temporal.log", free_port(), free_port(), ui=True
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON document, and what each decodes to when it is base64 (the
    HTTP API shows payload data that way)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value
        with contextlib.suppress(binascii.Error, ValueError):
            yield base64.b64decode(value, validate=True).decode("utf-8", errors="replace")


async def _http_api_text(ui: str) -> str:
    """The workflows and their histories as Temporal's HTTP API (behind the UI) serves them."""
    async with httpx.AsyncClient(base_url=ui, timeout=10) as http:

        async def listing() -> httpx.Response | None:
            try:
                return await http.get("/api/v1/namespaces/default/workflows")
            except httpx.TransportError:
                return None

        listed = await until(  # the UI server starts a little after the frontend
            listing,
            lambda listed: listed is not None and listed.status_code == 200,
            "Temporal's HTTP API listing the workflows",
            every=0.2,
        )
        assert listed is not None
        documents: list[Any] = [listed.json()]
        for execution in listed.json().get("executions", []):
            workflow_id = execution["execution"]["workflowId"]
            history = await http.get(
                f"/api/v1/namespaces/default/workflows/{workflow_id}/history",
                params={"execution.runId": execution["execution"]["runId"]},
            )
            assert history.status_code == 200, history.text
            documents.append(history.json())
    return "\n".join(s for doc in documents for s in _strings(doc))


def _files_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("temporal.db*")))


async def test_retained_then_deleted_text_is_nowhere_in_temporal(
    temporal_server: TemporalDevServer,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
    tmp_path: Path,
) -> None:
    secret = f"Anna adopted a dog named Zorblax-{uuid.uuid4().hex}"
    control = f"control-string-{uuid.uuid4().hex}"
    client = await Client.connect(temporal_server.address, data_converter=TEST_CONVERTER)
    services = WorkerServices(pool, embedder, cpu, None)
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    app = create_app(_never)
    app.state.services = Services(settings, pool, client, embedder, cpu)
    transport = httpx.ASGITransport(app=app)
    async with (
        build_worker(client, settings.task_queue, services, interceptor),
        httpx.AsyncClient(transport=transport, base_url="http://engram.test") as api,
    ):
        retained = await api.post(
            f"{BASE}/{bank_id}/memories", json={"items": [{"content": secret}]}
        )
        assert retained.status_code == 200, retained.text
        recalled = await api.post(f"{BASE}/{bank_id}/memories/recall", json={"query": "dog"})
        assert "Zorblax" in recalled.text  # it went through the pipeline
        assert (await api.delete(f"{BASE}/{bank_id}")).status_code == 200

    # The control goes through Temporal without the codec: the searches below must see it.
    plain = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    handle = await plain.start_workflow(
        "NoSuchWorkflow", control, id=f"control-{uuid.uuid4()}", task_queue="nobody-polls"
    )
    await handle.terminate()

    served = await _http_api_text(f"http://127.0.0.1:{temporal_server.ui_port}")
    stored = _files_bytes(tmp_path)
    log = (tmp_path / "temporal.log").read_bytes()
    assert control in served and control.encode() in stored
    assert "Zorblax" not in served
    assert b"Zorblax" not in stored and b"Zorblax" not in log
    assert "RetainWorkflow" in served  # the retain did run on this server

    assert (tmp_path / "temporal.db").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "temporal.log").stat().st_mode & 0o777 == 0o600


async def test_a_payload_sealed_with_another_key_is_refused() -> None:
    ours, theirs = data_converter(_key()), data_converter(_key())
    sealed = await ours.encode(["Rex"])
    assert (await ours.decode(sealed, [str])) == ["Rex"]
    with pytest.raises(PayloadDecryptionError, match="does not have"):
        await theirs.decode(sealed, [str])
    # Rotation: the new key still opens what the previous one sealed.
    old, new = _key(), _key()
    before = await data_converter(old).encode(["Rex"])
    assert (await data_converter(new, [old]).decode(before, [str])) == ["Rex"]
    assert isinstance(ours.payload_codec, AESGCMCodec)
    assert json.dumps("Rex").encode() not in sealed[0].data


def _key() -> bytes:
    return base64.b64decode(new_key_text())


def _never() -> Any:
    raise AssertionError("the lifespan does not run under ASGITransport")

"""`engram reembed`: switch the database to another embedding model, as a Temporal workflow
(workflows/reembed.py) that the running workers carry out while recall keeps answering."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, TextIO

import asyncpg
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from engine import reembed
from engine.embedding import load_embedder
from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.backup import engram_database
from engram.cli_support import command
from workflows.converter import converter_for
from workflows.reembed import REEMBED_WORKFLOW_ID, ReembedRequest, ReembedWorkflow

POLL_SECONDS = 2.0

EPILOG_REEMBED = """examples:
  engram reembed --model onnx:/models/e5.onnx:/models/tokenizer.json:384
  engram reembed --status
  engram reembed --cancel       # before the switch only; the old vectors stay in use
Runs on the workers while `engram up` (or your deployment) runs; recall answers from the old
vectors until the switch, then every process follows within seconds. Afterwards set
ENGRAM_EMBEDDING_MODEL to the new model for the next start.
"""


def add_reembed_parser(commands: Any) -> None:
    reembed = command(
        commands,
        "reembed",
        "switch the database to another embedding model while recall keeps answering",
        EPILOG_REEMBED,
    )
    reembed.add_argument("--model", help="the new model, as ENGRAM_EMBEDDING_MODEL names it")
    reembed.add_argument("--batch-size", type=int, default=256, help="facts per step")
    reembed.add_argument("--no-wait", action="store_true", help="start it and return")
    reembed.add_argument("--status", action="store_true", help="show the last run's progress")
    reembed.add_argument("--cancel", action="store_true", help="cancel a run before its switch")


def cmd_reembed(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    with engram_database(settings) as dsn:
        return asyncio.run(_reembed(settings, dsn, args, out))


async def _reembed(settings: Settings, dsn: str, args: argparse.Namespace, out: TextIO) -> int:
    if args.status:
        return await _print_status(dsn, out)
    try:
        client = await Client.connect(
            settings.resolved_temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=converter_for(settings),
        )
    except RuntimeError as exc:
        raise ConfigurationError(
            f"cannot reach Temporal at {settings.resolved_temporal_address} ({exc}); "
            "re-embedding runs on the workers: start Engram first (`engram up`)"
        ) from exc
    if args.cancel:
        try:
            await client.get_workflow_handle(REEMBED_WORKFLOW_ID).cancel()
        except RPCError as exc:
            out.write(f"no re-embedding to cancel ({exc.message})\n")
            return 1
        out.write("cancel requested: a run that has not switched leaves the old vectors in use\n")
        return 0
    if args.model is None:
        raise ConfigurationError("name the model: engram reembed --model NAME")
    # Fails here, with the reason, rather than in a worker's retries.
    target = await asyncio.to_thread(load_embedder, args.model, settings.model_dir)
    handle = await client.start_workflow(
        ReembedWorkflow.run,
        ReembedRequest(args.model, args.batch_size),
        id=REEMBED_WORKFLOW_ID,
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    out.write(f"re-embedding into {target.space} (workflow {REEMBED_WORKFLOW_ID})\n")
    if args.no_wait:
        out.write("follow it with `engram reembed --status`\n")
        return 0
    while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
        await _print_status(dsn, out)
        await asyncio.sleep(POLL_SECONDS)
    await handle.result()
    await _print_status(dsn, out)
    out.write(
        f"done: set ENGRAM_EMBEDDING_MODEL={args.model} for every server and worker before "
        "their next start (running ones already follow)\n"
    )
    return 0


async def _print_status(dsn: str, out: TextIO) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        run = await reembed.latest_run(conn)
    finally:
        await conn.close()
    if run is None:
        out.write("no re-embedding has run\n")
        return 0
    share = run.done / run.total if run.total else 1.0
    out.write(
        f"{run.state}: {run.done:,}/{run.total:,} ({share:.0%}) into {run.space}"
        f" (model {run.model}, from {run.from_space or 'unrecorded'})"
        + (f"; {run.error}" if run.error else "")
        + "\n"
    )
    return 0

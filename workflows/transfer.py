"""TransferWorkflow: a bank's export, an archive's import, or a clone (both in turn).

The work is in two activities (engine/transfer/): the export writes the archive from one
snapshot into file storage; the import reads it section by section, committing its position
with every batch, so a worker that dies mid-import is replaced by one that resumes. The
operations row says running, then completed with the result (download URL, counts) or
failed with the reason.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.retain import RetainActivities
    from activities.transfer import TransferActivities
    from engine.retain.payloads import OperationUpdate
    from engine.transfer.payloads import (
        ExportJob,
        ImportJob,
        TransferEnd,
        TransferRequest,
        export_key,
    )
    from workflows import policies
    from workflows.errors import error_message
    from workflows.policies import options


def transfer_workflow_id(bank_id: str, operation_id: str) -> str:
    return f"transfer:{bank_id}:{operation_id}"


@workflow.defn
class TransferWorkflow:
    @workflow.run
    async def run(self, request: TransferRequest) -> dict[str, Any]:
        result: dict[str, Any] = {}
        # A clone's archive is its own; an upload is consumed by its import.
        discard = request.archive_key if request.plan is not None else None
        try:
            await self._record(request, "running")
            key = request.archive_key
            if request.scope is not None:
                key = export_key(request.operation_id)
                filename = f"{request.bank_id}-{request.kind}.zip"
                job = ExportJob(request.bank_id, request.operation_id, request.scope, key, filename)
                result.update(
                    await workflow.execute_activity_method(
                        TransferActivities.export_archive, job, **options(policies.TRANSFER)
                    )
                )
                if request.plan is not None:
                    discard = key
                    result = {"exported": result["exported"]}
            if request.plan is not None and key is not None:
                result.update(
                    await workflow.execute_activity_method(
                        TransferActivities.import_archive,
                        ImportJob(request.plan, key),
                        **options(policies.TRANSFER),
                    )
                )
                result["target_bank_id"] = request.plan.bank_id
        except asyncio.CancelledError:
            await self._end(request, discard)
            await self._record(request, "cancelled", error="cancelled")
            raise
        except ActivityError as exc:
            # The archive stays (downloadable under its key) so nothing is lost.
            await self._end(request, None)
            kept = {"storage_key": discard} if discard is not None else None
            await self._record(request, "failed", result=kept, error=error_message(exc))
            return {"error": error_message(exc)}
        await self._end(request, discard)
        await self._record(request, "completed", result=result)
        return result

    async def _end(self, request: TransferRequest, discard: str | None) -> None:
        await workflow.execute_activity_method(
            TransferActivities.end_transfer,
            TransferEnd(request.operation_id, discard),
            **options(policies.BOOKKEEPING),
        )

    async def _record(
        self,
        request: TransferRequest,
        status: Any,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        await workflow.execute_activity_method(
            RetainActivities.update_operation,
            OperationUpdate(request.operation_id, status, result=result, error=error),
            **options(policies.BOOKKEEPING),
        )

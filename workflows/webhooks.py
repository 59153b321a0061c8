"""Webhook deliveries: one workflow per delivery, so a slow or dead receiver holds up
nothing else; Temporal retries the send with backoff, then the delivery is marked failed."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.webhooks import (
        DeliveryFailure,
        DeliveryRequest,
        QueuedDeliveries,
        WebhookActivities,
        WebhookEvent,
    )
    from workflows import policies
    from workflows.errors import error_message


@workflow.defn
class WebhookDeliveryWorkflow:
    @workflow.run
    async def run(self, request: DeliveryRequest) -> None:
        try:
            await workflow.execute_activity_method(
                WebhookActivities.deliver_webhook,
                request,
                start_to_close_timeout=policies.WEBHOOK.start_to_close,
                retry_policy=policies.WEBHOOK.retry,
                heartbeat_timeout=policies.WEBHOOK.heartbeat,
            )
        except ActivityError as exc:
            await workflow.execute_activity_method(
                WebhookActivities.fail_webhook_delivery,
                DeliveryFailure(request.delivery_id, error_message(exc)),
                start_to_close_timeout=policies.DATABASE.start_to_close,
                retry_policy=policies.DATABASE.retry,
                heartbeat_timeout=policies.DATABASE.heartbeat,
            )


async def notify(bank_id: str, event_id: str, event_type: str, data: dict[str, Any]) -> None:
    """From a workflow: queue the event's deliveries and start one delivery workflow each,
    abandoned (they outlive the caller)."""
    queued: QueuedDeliveries = await workflow.execute_activity_method(
        WebhookActivities.queue_webhook_deliveries,
        WebhookEvent(bank_id, event_id, event_type, data),
        start_to_close_timeout=policies.DATABASE.start_to_close,
        retry_policy=policies.DATABASE.retry,
        heartbeat_timeout=policies.DATABASE.heartbeat,
    )
    for delivery_id in queued.delivery_ids:
        await workflow.start_child_workflow(
            WebhookDeliveryWorkflow.run,
            DeliveryRequest(delivery_id),
            id=f"webhook-delivery:{delivery_id}",
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )

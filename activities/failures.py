"""Engine errors become Temporal failures here, and only here.

The error's class says whether a retry can help (`EngramError.retryable`; an LLM request
error decides per instance: 429, 5xx and timeouts yes, other 4xx no). A retryable error is
an ordinary failure that the activity's retry policy retries; anything else is
`ApplicationError(non_retryable=True)`, which ends the activity at once. The failure's type
is the error's class name (`InvalidInput`, `NotFound`, `LLMRequestError`), which is what
workflows and the server read back. Other exceptions (a dropped connection, a deadlock) pass
through unchanged and are retried by policy.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from engine.errors import EngramError


def as_failure(exc: EngramError) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=not exc.retryable)


class _FailureInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except EngramError as exc:
            raise as_failure(exc) from exc


class FailureInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _FailureInbound(next)

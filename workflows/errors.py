"""Failure messages as workflows report them."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ChildWorkflowError


def error_message(exc: BaseException) -> str:
    """The innermost cause's message: what actually went wrong."""
    while isinstance(exc, ActivityError | ChildWorkflowError) and exc.cause is not None:
        exc = exc.cause
    return str(exc) or type(exc).__name__

"""The error hierarchy the engine raises; `server/` maps it to HTTP, `activities/` to retries.

Each class says whether trying the same step again can help (`retryable`); the worker turns
an error into a Temporal failure in one place (activities/failures.py), so retry policies
never list error types by name.
"""


class EngramError(Exception):
    """Base of every error Engram raises on purpose. Not retryable unless a subclass (or an
    instance, like an LLM request error) says so: the same input would fail the same way."""

    retryable: bool = False


class InvalidInput(EngramError):
    """The caller sent something unusable; `field` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Unprocessable(InvalidInput):
    """Well-formed, but a value cannot be taken as it is: text with a NUL or a lone
    surrogate, a number or a date outside what can be stored (HTTP 422)."""


class TooLarge(Unprocessable):
    """A value over one of the limits in engine/limits.py; `limit` names the limit."""

    def __init__(self, field: str, message: str, limit: str) -> None:
        super().__init__(field, message)
        self.limit = limit


class RequestTooLarge(TooLarge):
    """The request as a whole is over a limit (HTTP 413), not one field of it."""


class NotFound(EngramError):
    """The named thing does not exist."""

    def __init__(self, what: str, key: str) -> None:
        super().__init__(f"{what} not found: {key}")
        self.what = what
        self.key = key


class Conflict(EngramError):
    """The request contradicts existing state (e.g. an operation id reused for other work)."""


class ConfigurationError(EngramError):
    """Settings that cannot work together (e.g. an embedding model whose dimension
    differs from the one the database was created with)."""


class ExtractionFailed(EngramError):
    """An extractor could not produce valid facts after repair and retries. Retryable: a
    model may answer validly next time; the policy's attempts bound it."""

    retryable = True


class OperationFailed(EngramError):
    """Asynchronous work ran and failed after its retries; the operation record has why."""

    def __init__(self, operation_id: str, reason: str) -> None:
        super().__init__(reason)
        self.operation_id = operation_id

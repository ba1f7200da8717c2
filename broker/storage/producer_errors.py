"""Map failures of a log append (or of any request the disk failed) to the Kafka error code and
message a client receives."""
import logging

from minilog.connector.batch import InvalidBatch
from minilog.connector.protocol import ErrorCode

from .log_throttle import RepeatLimiter, repeats_note

log = logging.getLogger("minilog.broker.produce")
_STORAGE_ERRORS = RepeatLimiter(60.0)  # a full disk refuses every request: one line a minute


def append_error_code(exc):
    code = getattr(exc, "code", None)
    if isinstance(exc, InvalidBatch) or (isinstance(code, int) and code > 0):
        return code, str(exc) or None
    if isinstance(exc, OSError):
        left_out = _STORAGE_ERRORS.admit((type(exc), exc.errno))
        if left_out is not None:
            log.error("storage error: %s%s", exc, repeats_note(left_out, 60.0))
        return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    log.exception("unexpected append failure")
    return ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)

"""Map failures of a log append to the Kafka error code and message a producer receives."""
import logging

from minilog.connector.batch import InvalidBatch
from minilog.connector.protocol import ErrorCode

log = logging.getLogger("minilog.broker.produce")


def append_error_code(exc):
    code = getattr(exc, "code", None)
    if isinstance(exc, InvalidBatch) or (isinstance(code, int) and code > 0):
        return code, str(exc) or None
    if isinstance(exc, OSError):
        log.error("storage error on append: %s", exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    log.exception("unexpected append failure")
    return ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)

"""The errors the REST API answers with, as Connect's `ConnectRestException` does: an HTTP status
and a message, rendered as `{"error_code": status, "message": message}`."""
from __future__ import annotations


class ConnectRestError(Exception):
    """An answer other than success: `status` is both the HTTP status and the body's error_code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(name: str) -> ConnectRestError:
    return ConnectRestError(404, f"Connector {name} not found")


def already_exists(name: str) -> ConnectRestError:
    return ConnectRestError(409, f"Connector {name} already exists")


class WorkerConfigError(ValueError):
    """A worker properties file Connect would refuse: the message names the setting."""

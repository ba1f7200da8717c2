"""Kafka's wire protocol, sans-IO: bytes in, message objects out, and back."""
from .errors import CorruptMessage, ErrorCode, KafkaError
from .framing import (
                      FrameReader,
                      FrameTooLarge,
                      RequestHeader,
                      decode_request,
                      decode_request_header,
                      decode_response,
                      decode_response_correlation,
                      encode_request,
                      encode_response,
)
from .messages import REQUESTS, RESPONSES, ApiKey, api_name, request, response

__all__ = [
                      "REQUESTS",
                      "RESPONSES",
                      "ApiKey",
                      "CorruptMessage",
                      "ErrorCode",
                      "FrameReader",
                      "FrameTooLarge",
                      "KafkaError",
                      "RequestHeader",
                      "api_name",
                      "decode_request",
                      "decode_request_header",
                      "decode_response",
                      "decode_response_correlation",
                      "encode_request",
                      "encode_response",
                      "request",
                      "response",
]

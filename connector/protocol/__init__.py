"""Kafka's wire protocol, sans-IO: bytes in, message objects out, and back."""
from .errors import CorruptMessage, ErrorCode, KafkaError
from .framing import (FrameReader, FrameTooLarge, RequestHeader, decode_request,
                      decode_request_header, decode_response, decode_response_correlation,
                      encode_request, encode_response)
from .messages import ApiKey, REQUESTS, RESPONSES, api_name, request, response

__all__ = ["ApiKey", "CorruptMessage", "ErrorCode", "FrameReader", "FrameTooLarge", "KafkaError",
           "REQUESTS", "RESPONSES", "RequestHeader", "api_name", "decode_request",
           "decode_request_header", "decode_response", "decode_response_correlation",
           "encode_request", "encode_response", "request", "response"]

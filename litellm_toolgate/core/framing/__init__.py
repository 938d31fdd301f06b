"""Framing: cutting a response body into messages (Server-Sent Events, AWS event-stream,
newline-delimited JSON). Sans-I/O; imports only the core's errors and enums.
"""

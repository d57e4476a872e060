"""The server's side of the stdio pipe: message framing that survives malformed input.

pygls reads `Content-Length` framed messages itself, but a header it cannot
read (`Content-Length: abc`) desynchronises it for good: the body that
follows is taken for header lines, and every later message with it. A body
that is not JSON, or a request whose parameters do not fit the method
(`"params": 5`, a negative position), is logged and never answered. The
protocol says such input gets an error response and the server goes on.

So the server reads its standard input through `FramedInput`, which hands
pygls only well-formed frames of JSON objects, answers the rest with a
JSON-RPC error (id null when the request's id cannot be known) and finds the
next header; `Output` owns the protocol's output, a duplicate of the
standard output: pygls closes it on `exit`, the interpreter's own `sys.stdout`
stays open (and is pointed at the standard error, where a stray print cannot
corrupt the protocol). Malformed parameters are answered by
`RobustProtocol`, a pygls protocol that keeps the request's id.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Any, BinaryIO, Optional

from pygls.protocol import LanguageServerProtocol

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
# The largest message body read; a larger Content-Length is malformed (nothing of that size is sent by an editor).
MAX_BODY = 1 << 30
_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n\Z", re.IGNORECASE)
_TRAILING_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*([0-9]+)[ \t]*\r?\n\Z", re.IGNORECASE)


class Output:
    """The protocol's output stream: whole frames written under a lock, so that the
    error responses of `FramedInput` (on pygls's reader thread) never split one of pygls's."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb")
        self._lock = threading.Lock()

    @classmethod
    def from_stdout(cls) -> "Output":
        """Take over file descriptor 1 and point it (and `sys.stdout`) at the standard error."""
        output = cls(os.dup(1))
        os.dup2(2, 1)
        return output

    def write(self, data: bytes) -> None:
        """Write one whole frame; after `exit` closed the stream, a late message is dropped."""
        with self._lock:
            if self._file.closed:
                return
            self._file.write(data)
            self._file.flush()

    def flush(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()
                except OSError:  # the client is gone: nothing left to flush to
                    pass

    @property
    def closed(self) -> bool:
        return self._file.closed

    def send_error(self, message_id: Any, code: int, text: str) -> None:
        """A JSON-RPC error response (id null when it cannot be known)."""
        if not isinstance(message_id, (int, str)) or isinstance(message_id, bool):
            message_id = None
        body = json.dumps({"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}}).encode()
        try:
            self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        except (OSError, ValueError):  # closed, or the client is gone
            logger.warning("could not send an error response: %s", text)


class FramedInput:
    """The standard input as pygls reads it (`readline`, `read`): only well-formed frames
    of JSON objects. Malformed input is answered on `output` and skipped."""

    def __init__(self, raw: BinaryIO, output: Output) -> None:
        self._raw = raw
        self._output = output
        self._ready = b""  # the canonical frame being handed over
        self._next_line: Optional[bytes] = None  # a header line found while resynchronising

    def readline(self) -> bytes:
        if not self._ready:
            self._ready = self._next_frame()
        end = self._ready.find(b"\n") + 1 or len(self._ready)
        line, self._ready = self._ready[:end], self._ready[end:]
        return line

    def read(self, size: int) -> bytes:
        data, self._ready = self._ready[:size], self._ready[size:]
        return data

    def _line(self) -> bytes:
        if self._next_line is not None:
            line, self._next_line = self._next_line, None
            return line
        return self._raw.readline()

    def _next_frame(self) -> bytes:
        """The next well-formed message as one frame, or b"" at the end of the input."""
        while True:
            length: Optional[int] = None
            problem: Optional[str] = None
            while True:  # the header block, up to its empty line
                line = self._line()
                if not line:
                    return b""
                if not line.strip():
                    break
                match = _HEADER.match(line)
                if match:
                    value = match.group(1)
                    if value.isdigit() and int(value) <= MAX_BODY:
                        length = int(value)
                    else:
                        problem = f"invalid Content-Length header {value.decode('latin-1')!r}"
            if length is None:
                self._output.send_error(None, PARSE_ERROR, problem or "message without a Content-Length header")
                if not self._resynchronise():
                    return b""
                continue
            body = self._read_body(length)
            if body is None:
                return b""
            error = _invalid_body(body)
            if error is not None:
                self._output.send_error(*error)
                continue
            return b"Content-Length: %d\r\n\r\n" % len(body) + body

    def _read_body(self, length: int) -> Optional[bytes]:
        chunks, left = [], length
        while left:
            chunk = self._raw.read(left)
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _resynchronise(self) -> bool:
        """Skip input of unknown length up to the next Content-Length header (a body has
        no newline of its own before the next header, so the header ends a line)."""
        while True:
            line = self._raw.readline()
            if not line:
                return False
            match = _TRAILING_HEADER.search(line)
            if match:
                self._next_line = line[match.start():]
                return True


def _invalid_body(body: bytes) -> Optional[tuple[Any, int, str]]:
    """(id, code, message) of the error response a body gets, or None when it is a JSON object."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as error:
        return None, PARSE_ERROR, f"message body is not JSON: {error}"
    if not isinstance(message, dict):
        return None, INVALID_REQUEST, "message is not a JSON object"
    if message.get("jsonrpc") != "2.0":
        return message.get("id"), INVALID_REQUEST, 'message without "jsonrpc": "2.0"'
    return None


class _Invalid:
    """A message whose parameters do not fit its method: answered with an error if it is a request."""

    jsonrpc = "2.0"

    def __init__(self, data: dict[str, Any], problem: str) -> None:
        self.data = data
        self.problem = problem


class RobustProtocol(LanguageServerProtocol):
    """pygls's protocol, answering a request with malformed parameters (-32602, its own id)
    instead of dropping it; a malformed notification is logged and skipped."""

    output: Optional[Output] = None

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except Exception as error:  # noqa: BLE001 - whatever the converter says, the message is invalid
            cause = error.__cause__ or error
            return _Invalid(data, f"invalid parameters for {data.get('method', 'a message')!r}: {_one_line(cause)}")

    def handle_message(self, message) -> None:
        if isinstance(message, _Invalid):
            data = message.data
            if "id" in data and "method" in data and self.output is not None:
                self.output.send_error(data["id"], INVALID_PARAMS, message.problem)
            else:
                logger.warning("skipped a malformed message: %s", message.problem)
            return
        super().handle_message(message)


def _one_line(error: BaseException) -> str:
    """A converter's complaint in one line (cattrs groups nest the real causes)."""
    leaves = getattr(error, "exceptions", None)
    if leaves:
        return "; ".join(_one_line(leaf) for leaf in leaves)
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


"""A small etcd v3 client over etcd's JSON gateway (``/v3/kv/*``, ``/v3/watch``); stdlib only.

Keys and values travel base64-encoded; int64 fields come back as strings. Every call tries the endpoints
in turn, so one member down does not stop the API server.
"""

from __future__ import annotations

import base64
import http.client
import json
import queue
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator, Sequence


class EtcdError(RuntimeError):
    """etcd did not answer, or answered with an error."""


class Compacted(EtcdError):
    """A watch asked for a revision etcd has compacted away (Kubernetes answers 410 Gone)."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"required revision has been compacted (compact revision {compact_revision})")
        self.compact_revision = compact_revision


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def prefix_end(prefix: bytes) -> bytes:
    """The range end that selects every key starting with ``prefix`` (etcd's ``--prefix``)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "KeyValue":
        return cls(_unb64(data.get("key")), _unb64(data.get("value")), int(data.get("create_revision", 0)),
                   int(data.get("mod_revision", 0)))


@dataclass(frozen=True)
class WatchEvent:
    type: str  # PUT or DELETE
    kv: KeyValue
    prev: KeyValue | None


class Etcd:
    def __init__(self, endpoints: Sequence[str], timeout: float = 10.0) -> None:
        self.endpoints = [e.rstrip("/") for e in endpoints]
        if not self.endpoints:
            raise ValueError("no etcd endpoints")
        self.timeout = timeout
        self._preferred = self.endpoints[0]

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        errors = []
        data = json.dumps(body).encode()
        # Start with the endpoint that answered last, so a dead member costs one timeout, not one per call.
        preferred = self._preferred
        for endpoint in [preferred, *[e for e in self.endpoints if e != preferred]]:
            request = urllib.request.Request(endpoint + path, data=data, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - lab etcd
                    result: dict[str, Any] = json.loads(response.read())
                self._preferred = endpoint  # one assignment: safe across the server's threads
                return result
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")
                raise EtcdError(f"etcd {endpoint}{path}: HTTP {exc.code}: {detail}") from exc
            except (OSError, ValueError) as exc:
                errors.append(f"{endpoint}: {exc}")
        raise EtcdError("no etcd endpoint answered: " + "; ".join(errors))

    # ------------------------------------------------------------------ kv

    def get(self, key: bytes) -> tuple[KeyValue | None, int]:
        """The key's value (or None) and the store's revision."""
        result = self._post("/v3/kv/range", {"key": _b64(key)})
        kvs = result.get("kvs") or []
        return (KeyValue.from_json(kvs[0]) if kvs else None), int(result["header"]["revision"])

    def range_prefix(self, prefix: bytes, revision: int = 0) -> tuple[list[KeyValue], int]:
        body: dict[str, Any] = {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))}
        if revision:
            body["revision"] = str(revision)
        result = self._post("/v3/kv/range", body)
        return [KeyValue.from_json(kv) for kv in result.get("kvs") or []], int(result["header"]["revision"])

    def revision(self) -> int:
        result = self._post("/v3/kv/range", {"key": _b64(b"\0"), "count_only": True})
        return int(result["header"]["revision"])

    def _txn(self, compare: dict[str, Any], success: dict[str, Any]) -> tuple[bool, int]:
        result = self._post("/v3/kv/txn", {"compare": [compare], "success": [success]})
        return bool(result.get("succeeded")), int(result["header"]["revision"])

    def create(self, key: bytes, value: bytes) -> int | None:
        """Put only if the key does not exist: the new revision, or None when it exists."""
        ok, rev = self._txn({"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"},
                            {"request_put": {"key": _b64(key), "value": _b64(value)}})
        return rev if ok else None

    def update(self, key: bytes, value: bytes, mod_revision: int) -> int | None:
        """Put only if the key is still at ``mod_revision``: the new revision, or None on a conflict."""
        ok, rev = self._txn({"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)},
                            {"request_put": {"key": _b64(key), "value": _b64(value)}})
        return rev if ok else None

    def delete(self, key: bytes, mod_revision: int) -> int | None:
        """Delete only if the key is still at ``mod_revision``: the new revision, or None on a conflict."""
        ok, rev = self._txn({"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)},
                            {"request_delete_range": {"key": _b64(key)}})
        return rev if ok else None

    def put(self, key: bytes, value: bytes) -> int:
        return int(self._post("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})["header"]["revision"])

    def delete_prefix(self, prefix: bytes) -> int:
        """Delete every key under ``prefix``; the number deleted."""
        result = self._post("/v3/kv/deleterange", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})
        return int(result.get("deleted", 0))

    def compact(self, revision: int) -> None:
        self._post("/v3/kv/compaction", {"revision": str(revision), "physical": True})

    # ------------------------------------------------------------------ watch

    def watch_prefix(self, prefix: bytes, start_revision: int, deadline_seconds: float,
                     poll: float = 1.0) -> Iterator[WatchEvent | None]:
        """Events under ``prefix`` from ``start_revision`` on; yields None every ``poll`` seconds of quiet
        (so the caller can check its deadline and its client), ends after ``deadline_seconds``.
        Raises Compacted when etcd no longer has ``start_revision``.

        A reader thread blocks on the stream and hands lines over through a queue: a socket timeout would
        leave the buffered stream unusable, and closing the connection is what ends the reader."""
        body = json.dumps({"create_request": {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix)),
                                              "start_revision": str(start_revision), "prev_kv": True}}).encode()
        errors = []
        conn: http.client.HTTPConnection | None = None
        response: http.client.HTTPResponse | None = None
        for endpoint in self.endpoints:
            parsed = urllib.parse.urlsplit(endpoint)
            conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port or 2379, timeout=self.timeout)
            try:
                conn.request("POST", "/v3/watch", body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                if conn.sock is not None:
                    conn.sock.settimeout(None)
                break
            except OSError as exc:
                errors.append(f"{endpoint}: {exc}")
                conn.close()
        if response is None or conn is None:
            raise EtcdError("no etcd endpoint answered the watch: " + "; ".join(errors))
        lines: queue.Queue[bytes | None] = queue.Queue()

        def reader(stream: http.client.HTTPResponse) -> None:
            buffer = b""
            try:
                while True:
                    chunk = stream.read1(65536)
                    if not chunk:
                        break
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        if line.strip():
                            lines.put(line)
            except (OSError, ValueError, http.client.HTTPException):
                pass
            if buffer.strip():
                lines.put(buffer)
            lines.put(None)

        thread = threading.Thread(target=reader, args=(response,), daemon=True)
        thread.start()
        end = time.monotonic() + deadline_seconds
        try:
            while time.monotonic() < end:
                try:
                    line = lines.get(timeout=min(poll, max(0.01, end - time.monotonic())))
                except queue.Empty:
                    yield None
                    continue
                if line is None:
                    raise EtcdError("etcd closed the watch stream")
                message = json.loads(line)
                if "error" in message:
                    raise EtcdError(f"etcd watch error: {message['error']}")
                result = message.get("result", {})
                if int(result.get("compact_revision", 0) or 0):
                    raise Compacted(int(result["compact_revision"]))
                for event in result.get("events") or []:
                    prev = event.get("prev_kv")
                    yield WatchEvent(event.get("type", "PUT"), KeyValue.from_json(event["kv"]),
                                     KeyValue.from_json(prev) if prev else None)
        finally:
            try:
                if conn.sock is not None:
                    conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

"""HTTPS front of the lab API server: authentication, routing, discovery, watch streams."""

from __future__ import annotations

import hmac
import json
import select
import socket
import ssl
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .api import Api, bad_request
from .etcd import Compacted, EtcdError
from .resources import GROUPS, RESOURCES, ResourceType, api_group_list, api_resource_list, lookup
from .store import ApiError
from .table import table, wants_table

KUBE_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-lab", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22.0",
                "compiler": "gc", "platform": "linux/amd64"}
PUBLIC_PATHS = {"/version", "/healthz", "/livez", "/readyz"}
DEFAULT_WATCH_SECONDS = 1800


class LabApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: Api, token: str, tls: ssl.SSLContext | None) -> None:
        self.api = api
        self.token = token
        self.tls = tls
        super().__init__(address, Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs here, in the connection's own thread, so one slow client blocks no one.
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        Handler(request, client_address, self)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: LabApiServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        print(f"{self.address_string()} {format % args}", flush=True)

    # ------------------------------------------------------------------ plumbing

    def _body(self) -> bytes:
        # Always read the body, even for requests we refuse: the connection is kept alive.
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, exc: ApiError) -> None:
        self._send(exc.code, exc.status())

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        # Bytes: compare_digest refuses non-ASCII str, and a client may send anything.
        if header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip().encode(), self.server.token.encode()):
            return True
        return False

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        body = self._body()
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        try:
            if path not in PUBLIC_PATHS and not self._authorized():
                raise ApiError(401, "Unauthorized", "Unauthorized")
            self._route(method, path, query, body)
        except ApiError as exc:
            self._error(exc)
        except EtcdError as exc:
            self._error(ApiError(500, "InternalError", f"Internal error occurred: etcd: {exc}"))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a Status, not a dropped connection, whatever went wrong
            self._error(ApiError(500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------ routing

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        if path in ("/healthz", "/livez", "/readyz"):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if path == "/version":
            return self._send(200, KUBE_VERSION)
        if path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.server.server_address[1]}"}]})
        if path == "/apis":
            return self._send(200, api_group_list())
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            group = parts[1]
            if len(parts) == 2:
                if group not in GROUPS:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in GROUPS[group]]
                return self._send(200, {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
                                        "preferredVersion": versions[0]})
            version, rest = parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not any((r.group, r.version) == (group, version) for r in RESOURCES):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            return self._send(200, api_resource_list(group, version))
        namespace: str | None = None
        namespace_subresource = group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")
        if rest[0] == "namespaces" and len(rest) >= 3 and not namespace_subresource:
            # /namespaces/<ns>/<resource>/...: a namespaced request (not /namespaces/<name>/status).
            namespace, rest = rest[1], rest[2:]
        rt = lookup(group, version, rest[0])
        if rt is None or (namespace is not None and not rt.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (sub and sub not in rt.subresources and not (rt.kind == "Namespace" and sub == "finalize")):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self._resource(method, rt, namespace, name, sub, query, body)

    def _json(self, body: bytes) -> Any:
        try:
            return json.loads(body or b"{}")
        except ValueError as exc:
            raise bad_request(f"the request body is not JSON: {exc}") from exc

    def _resource(self, method: str, rt: ResourceType, namespace: str | None, name: str | None, sub: str,
                  query: dict[str, str], body: bytes) -> None:
        api = self.server.api
        dry_run = query.get("dryRun") == "All"
        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1"):
                    return self._watch(rt, namespace, query)
                listing = api.list(rt, namespace, query.get("labelSelector"), query.get("fieldSelector"))
                if wants_table(self.headers.get("Accept", "")):
                    return self._send(200, table(rt, listing["items"], listing["metadata"]["resourceVersion"],
                                                 query.get("includeObject", "Metadata")))
                return self._send(200, listing)
            if method == "POST":
                return self._send(201, api.create(rt, namespace, self._json(body), dry_run))
            if method == "DELETE":
                return self._send(200, api.delete_collection(rt, namespace, query.get("labelSelector"),
                                                             query.get("fieldSelector"), dry_run))
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if sub == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "pods/eviction accepts POST only")
            assert namespace is not None
            return self._send(201, api.evict(namespace, name, self._json(body), dry_run))
        if sub == "scale":
            assert namespace is not None
            if method == "GET":
                return self._send(200, api.scale(rt, namespace, name))
            if method in ("PUT", "PATCH"):
                content_type = self.headers.get("Content-Type", "") if method == "PATCH" else None
                return self._send(200, api.set_scale(rt, namespace, name, content_type, body))
            raise ApiError(405, "MethodNotAllowed", "scale accepts GET, PUT and PATCH")
        if method == "GET":
            if query.get("watch") in ("true", "1"):
                query = {**query, "fieldSelector": f"metadata.name={name}"}
                return self._watch(rt, namespace, query)
            obj = api.get(rt, namespace, name)
            if wants_table(self.headers.get("Accept", "")) and not sub:
                return self._send(200, table(rt, [obj], obj["metadata"]["resourceVersion"],
                                             query.get("includeObject", "Metadata")))
            return self._send(200, obj)
        if sub == "finalize":
            sub = ""
        if method == "PUT":
            return self._send(200, api.replace(rt, namespace, name, self._json(body), sub, dry_run))
        if method == "PATCH":
            return self._send(200, api.patch(rt, namespace, name, self.headers.get("Content-Type", ""), body, sub,
                                             dry_run))
        if method == "DELETE" and not sub:
            return self._send(200, api.delete(rt, namespace, name, self._json(body), dry_run))
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    # ------------------------------------------------------------------ watch

    def _client_gone(self) -> bool:
        return _peer_closed(self.connection)

    def _watch(self, rt: ResourceType, namespace: str | None, query: dict[str, str]) -> None:
        api = self.server.api
        store = api.store
        labels, fields = api.selectors(rt, query.get("labelSelector"), query.get("fieldSelector"))
        try:
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        except ValueError as exc:
            raise bad_request("timeoutSeconds must be a number") from exc
        rv = query.get("resourceVersion", "")
        initial: list[dict[str, Any]] = []
        if rv in ("", "0"):
            items, revision = store.list(rt, namespace)
            initial = [o for o in items if api.matches(rt, o, labels, fields)]
        else:
            try:
                revision = int(rv)
            except ValueError as exc:
                raise bad_request(f"invalid resourceVersion {rv!r}") from exc
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        events = store.etcd.watch_prefix(store.collection_key(rt, namespace), revision + 1, timeout, poll=1.0)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

        as_table = wants_table(self.headers.get("Accept", ""))
        tables_sent = 0

        def emit(kind: str, obj: dict[str, Any]) -> None:
            nonlocal tables_sent
            if as_table and kind in ("ADDED", "MODIFIED", "DELETED"):
                # kubectl get -w: each event a one-row Table; the column definitions come with the first.
                obj = table(rt, [obj], obj["metadata"].get("resourceVersion", ""), query.get("includeObject", "Metadata"))
                if tables_sent:
                    obj["columnDefinitions"] = []
                tables_sent += 1
            data = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        last_rv = revision
        last_bookmark = time.monotonic()
        try:
            for obj in initial:
                emit("ADDED", obj)
            try:
                for event in events:
                    if event is None:
                        if self._client_gone():
                            break
                        if bookmarks and time.monotonic() - last_bookmark > 30:
                            emit("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.group_version,
                                              "metadata": {"resourceVersion": str(last_rv)}})
                            last_bookmark = time.monotonic()
                        continue
                    last_rv = event.kv.mod_revision
                    try:
                        new = store.decode_event(rt, event.kv) if event.type != "DELETE" else None
                        old = store.decode_event(rt, event.prev) if event.prev is not None else None
                    except ApiError as exc:
                        emit("ERROR", exc.status())
                        break
                    new_match = new is not None and api.matches(rt, new, labels, fields)
                    old_match = old is not None and api.matches(rt, old, labels, fields)
                    if event.type == "DELETE":
                        if old_match and old is not None:
                            old["metadata"]["resourceVersion"] = str(event.kv.mod_revision)
                            emit("DELETED", old)
                    elif new is not None and new_match and old_match:
                        emit("MODIFIED", new)
                    elif new is not None and new_match:
                        emit("ADDED", new)
                    elif old_match and old is not None:
                        # No longer selected: to this watcher the object is gone.
                        gone = dict(new or old)
                        emit("DELETED", gone)
            except Compacted as exc:
                emit("ERROR", ApiError(410, "Expired", f"too old resource version: {revision} "
                                       f"({exc.compact_revision})").status())
            except EtcdError as exc:
                emit("ERROR", ApiError(500, "InternalError", f"Internal error occurred: etcd: {exc}").status())
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, socket.timeout, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            close = getattr(events, "close", None)
            if close:
                close()


def _peer_closed(sock: Any) -> bool:
    """Has the client closed the connection? (A watch writes nothing while quiet, so it would not notice.)"""
    try:
        readable, _w, _x = select.select([sock], [], [], 0)
        if not readable:
            return False
        sock.setblocking(False)
        try:
            return sock.recv(1) == b""
        finally:
            sock.setblocking(True)
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except (OSError, ValueError):
        return True


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["http/1.1"])
    return context

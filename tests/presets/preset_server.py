"""A local HTTP server for the preset tests: GCS- and Hugging Face-style headers, redirects, truncation."""

import base64
import collections
import dataclasses
import hashlib
import http.server
import threading
import time


@dataclasses.dataclass
class Route:
    body: bytes = b""
    headers: dict = dataclasses.field(default_factory=dict)
    status: int = 200
    redirect_to: str = None
    send_bytes: int = None  # Send only this many bytes, then close (a broken-off download).
    content_length: int = None  # Announce this length instead of len(body).
    delay: float = 0.0  # Seconds before the response headers.
    stall: float = 0.0  # Seconds between the headers and the body (a server that stops sending).
    trickle: float = 0.0  # Seconds between bytes of the body, one byte at a time.


class PresetServer:
    """Serves `routes` on 127.0.0.1 in a daemon thread; counts requests per path.

    Use as a context manager; `close()` shuts the server down and joins the thread.
    """

    def __init__(self):
        self.routes = {}
        self.requests = collections.Counter()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 10  # A stuck client cannot hold a handler thread for long.

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests[self.path] += 1
                route = server.routes.get(self.path)
                if route is None:
                    self.send_error(404, "Entry not found")
                    return
                time.sleep(route.delay)
                if route.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.url(route.redirect_to))
                    for key, value in route.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(route.status)
                length = len(route.body) if route.content_length is None else route.content_length
                self.send_header("Content-Length", str(length))
                for key, value in route.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                sent = route.body if route.send_bytes is None else route.body[:route.send_bytes]
                self.close_connection = True
                try:
                    self.wfile.flush()
                    time.sleep(route.stall)
                    if not route.trickle:
                        self.wfile.write(sent)
                        self.wfile.flush()
                        return
                    # Bounded by len(body) * trickle; stops as soon as the client hangs up.
                    for index in range(len(sent)):
                        self.wfile.write(sent[index:index + 1])
                        self.wfile.flush()
                        time.sleep(route.trickle)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def url(self, path=""):
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{path}"

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Helpers that publish files the way the real sources do.

    def add_gcs_object(self, path, body, md5_body=None, **route_options):
        """Like storage.googleapis.com: x-goog-hash (crc32c and md5, base64) and the stored length."""
        md5 = base64.b64encode(hashlib.md5(body if md5_body is None else md5_body).digest()).decode()
        headers = {"x-goog-hash": "crc32c=AAAAAA==", "x-goog-stored-content-length": str(len(body)),
                   "ETag": f'"{hashlib.md5(body).hexdigest()}"'}
        headers["x-goog-hash"] += f",md5={md5}"
        self.routes[path] = Route(body=body, headers=headers, **route_options)

    def add_hf_file(self, repo_path, body, lfs, sha256=None, **route_options):
        """Like huggingface.co: a git-sha1 ETag for small files, a redirect with X-Linked-* for LFS files."""
        if not lfs:
            etag = hashlib.sha1(f"blob {len(body)}\0".encode() + body).hexdigest()
            self.routes[repo_path] = Route(body=body, headers={"ETag": f'"{etag}"'}, **route_options)
            return
        digest = sha256 or hashlib.sha256(body).hexdigest()
        cdn_path = "/cdn" + repo_path
        self.routes[repo_path] = Route(redirect_to=cdn_path, headers={
            "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(body)), "ETag": f'"{digest}"'})
        # The CDN's own ETag is an md5, not the content hash the checks use.
        self.routes[cdn_path] = Route(body=body, headers={"ETag": f'"{hashlib.md5(b"x").hexdigest()}"'},
                                      **route_options)

"""A TLS-terminating front end stand-in: an HTTP reverse proxy on loopback that forwards
each request from source address 127.0.0.2 (not the server's trusted 127.0.0.1) and adds
``X-Forwarded-Proto: https`` and ``X-Forwarded-For``, as Cloud Run's front end does.

Run: python tests/forwarding_proxy.py LISTEN_PORT TARGET_PORT  (prints "ready PORT")
"""

from __future__ import annotations

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SOURCE = "127.0.0.2"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate"}
MAX_BODY = 1 << 20


def main(listen_port: int, target_port: int) -> None:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _forward(self) -> None:
            length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["X-Forwarded-Proto"] = "https"
            headers["X-Forwarded-For"] = self.client_address[0]
            upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=30,
                                                  source_address=(SOURCE, 0))
            try:
                upstream.request(self.command, self.path, body=body, headers=headers)
                reply = upstream.getresponse()
                data = reply.read(MAX_BODY)
                self.send_response(reply.status, reply.reason)
                for key, value in reply.getheaders():
                    if key.lower() not in HOP_BY_HOP | {"content-length"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            finally:
                upstream.close()

        do_GET = do_POST = do_PUT = do_DELETE = _forward

    server = ThreadingHTTPServer(("127.0.0.1", listen_port), Forward)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))

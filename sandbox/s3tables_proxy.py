"""A pass-through HTTP proxy in front of moto's S3 Tables control plane that fixes two replies.

    s3tables_proxy.py LISTEN_PORT UPSTREAM_PORT [lossy]   (both on 127.0.0.1)

With `lossy`, the UpdateTableMetadataLocation reply is left as moto sends it (unparseable by the
SDK after the pointer moved): a real lost reply, for the tests of its resolution.

moto 5.2.5 answers UpdateTableMetadataLocation (PUT /tables/{arn}/{ns}/{name}/metadata-location)
with `"namespace": "shop"` and `"tableArn"`, where the S3 Tables API model has a list
(`"namespace": ["shop"]`) and `"tableARN"`. aws-sdk-s3tables cannot parse that reply, so the call
fails after moto already moved the pointer: every commit would look like a lost reply. And its
GetTable reply has `"managedByService": false`, where the model has a string (the service that
manages the table) that AWS leaves out for a customer's table; aws-sdk-s3tables 1.59 refuses
that reply too. This proxy rewrites just those two replies to the shape AWS sends; every other
request and reply (the rest of the control plane, and S3 traffic to the table warehouses) passes
through unchanged. It is test scaffolding for the emulator: tidemark's own code reads the API as
AWS documents it.
"""

from __future__ import annotations

import http.client
import http.server
import json
import sys

UPSTREAM = ("127.0.0.1", 0)
LOSSY = False
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate"}


def fix_update_metadata_location(body: bytes) -> bytes:
    """The AWS shape of an UpdateTableMetadataLocation reply (see the module doc)."""
    try:
        reply = json.loads(body)
    except ValueError:
        return body
    if not isinstance(reply, dict):
        return body
    if isinstance(reply.get("namespace"), str):
        reply["namespace"] = [reply["namespace"]]
    if "tableArn" in reply and "tableARN" not in reply:
        reply["tableARN"] = reply.pop("tableArn")
    return json.dumps(reply).encode()


def fix_get_table(body: bytes) -> bytes:
    """A GetTable reply without moto's boolean `managedByService` (see the module doc)."""
    try:
        reply = json.loads(body)
    except ValueError:
        return body
    if isinstance(reply, dict) and isinstance(reply.get("managedByService"), bool):
        del reply["managedByService"]
        return json.dumps(reply).encode()
    return body


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    # Trailers end with an empty line.
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def forward(self) -> None:
        body = self.read_body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(*UPSTREAM, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
            status, reply_headers = reply.status, reply.getheaders()
        finally:
            upstream.close()
        path = self.path.split("?", 1)[0]
        if (self.command == "PUT" and path.startswith("/tables/") and path.endswith("/metadata-location")
                and status == 200 and not LOSSY):
            data = fix_update_metadata_location(data)
        elif self.command == "GET" and path == "/get-table" and status == 200:
            data = fix_get_table(data)
        self.send_response(status)
        for k, v in reply_headers:
            # A HEAD reply keeps the upstream length (the object's size); others get the body's.
            if k.lower() not in HOP_BY_HOP and (k.lower() != "content-length" or self.command == "HEAD"):
                self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = forward

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), format % args))


def main(argv: list[str]) -> None:
    global UPSTREAM, LOSSY
    listen, upstream = int(argv[1]), int(argv[2])
    LOSSY = len(argv) > 3 and argv[3] == "lossy"
    UPSTREAM = ("127.0.0.1", upstream)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen), Proxy)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for the end-to-end tests: in front of a local S3 server (moto), it
injects errors, resets, delays and lost replies into a chosen share of the requests.

Seeded (the same seed and request order give the same faults), bounded (at most --max-faults
faults, then it only forwards) and loopback only (it listens on 127.0.0.1 and forwards only to a
127.0.0.1 / localhost upstream). Standard library only.

Faults (--faults, comma separated, one picked at random per faulted request):
  503    reply 503 SlowDown without forwarding
  500    reply 500 InternalError without forwarding
  reset  close the connection without a reply, without forwarding
  lost   forward (the server does the work), then reply 500 instead of the server's reply
  delay  wait --delay seconds, then forward
  stall  forward, send the reply's headers, then wait --delay seconds before the body
  token  reply 400 InvalidToken (S3's answer to a malformed or invalid session token) without
         forwarding
  403    reply 403 AccessDenied without forwarding

Usage:
  python3 sandbox/fault_proxy.py --port 6310 --upstream http://127.0.0.1:6301 \\
      --seed 7 --rate 0.1 --faults 503,500,reset,lost --methods PUT,GET --max-faults 200 \\
      [--path-regex manifests/] [--port-file FILE] [--stats FILE]

--port 0 picks a free port and writes it to --port-file. --stats writes the counts as JSON on
exit (SIGTERM or SIGINT) and after every fault.
"""

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=float, default=0.1)
    p.add_argument("--faults", default="503")
    p.add_argument("--methods", default="GET,PUT,HEAD,POST,DELETE")
    p.add_argument("--path-regex", default="")
    p.add_argument("--query-regex", default="", help="fault only requests whose query matches")
    p.add_argument("--delay", type=float, default=3.0)
    p.add_argument("--max-faults", type=int, default=100)
    p.add_argument("--skip", type=int, default=0, help="spare the first N matching requests")
    p.add_argument("--port-file", default="")
    p.add_argument("--stats", default="")
    return p.parse_args()


class State:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.faults = [f.strip() for f in args.faults.split(",") if f.strip()]
        for f in self.faults:
            if f not in {"503", "500", "reset", "lost", "delay", "stall", "token", "403"}:
                sys.exit(f"unknown fault {f!r}")
        self.methods = {m.strip().upper() for m in args.methods.split(",") if m.strip()}
        self.path_re = re.compile(args.path_regex) if args.path_regex else None
        self.query_re = re.compile(args.query_regex) if args.query_regex else None
        self.seen = 0
        self.counts = {"requests": 0, "faults": 0}

    def pick(self, method, path, query):
        """The fault for this request, or None (decided under the lock, in arrival order)."""
        with self.lock:
            self.counts["requests"] += 1
            if method not in self.methods:
                return None
            if self.path_re and not self.path_re.search(path):
                return None
            if self.query_re and not self.query_re.search(query):
                return None
            self.seen += 1
            if self.seen <= self.args.skip or self.counts["faults"] >= self.args.max_faults:
                return None
            if self.rng.random() >= self.args.rate:
                return None
            fault = self.rng.choice(self.faults)
            self.counts["faults"] += 1
            self.counts[fault] = self.counts.get(fault, 0) + 1
        self.write_stats()
        return fault

    def write_stats(self):
        if self.args.stats:
            # Under the lock, so that a later count is never overwritten by an earlier one.
            with self.lock:
                with open(self.args.stats + ".tmp", "w") as f:
                    f.write(json.dumps(self.counts, sort_keys=True))
                os.replace(self.args.stats + ".tmp", self.args.stats)


def error_body(code, message):
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
    ).encode()


def make_handler(state, upstream):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet
            pass

        def read_body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def forward(self, body):
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            return resp, data

        def reply(self, status, headers, data, stall=0.0):
            self.send_response(status)
            length = str(len(data))
            for k, v in headers:
                if k.lower() == "content-length":
                    # A HEAD reply has no body but the length of the object's.
                    if self.command == "HEAD":
                        length = v
                elif k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", length)
            self.end_headers()
            if stall:
                self.wfile.flush()
                time.sleep(stall)
            if self.command != "HEAD":
                self.wfile.write(data)

        def fail(self, status, code, message):
            body = error_body(code, message)
            self.reply(status, [("Content-Type", "application/xml")], body if self.command != "HEAD" else b"")

        def handle_any(self):
            body = self.read_body()
            parsed = urllib.parse.urlsplit(self.path)
            fault = state.pick(self.command, parsed.path, parsed.query)
            if fault == "503":
                return self.fail(503, "SlowDown", "Please reduce your request rate.")
            if fault == "500":
                return self.fail(500, "InternalError", "We encountered an internal error. Please try again.")
            if fault == "token":
                return self.fail(400, "InvalidToken", "The provided token is malformed or otherwise invalid.")
            if fault == "403":
                return self.fail(403, "AccessDenied", "Access Denied")
            if fault == "reset":
                self.close_connection = True
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                except OSError:
                    pass
                self.connection.close()
                return
            if fault == "delay":
                time.sleep(state.args.delay)
            resp, data = self.forward(body)
            if fault == "lost":
                return self.fail(500, "InternalError", "The reply was lost (fault proxy).")
            stall = state.args.delay if fault == "stall" else 0.0
            self.reply(resp.status, resp.getheaders(), data, stall)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    return Handler


def main():
    args = parse_args()
    upstream = urllib.parse.urlsplit(args.upstream)
    if upstream.scheme != "http" or upstream.hostname not in LOOPBACK:
        sys.exit(f"the upstream must be a loopback http URL, not {args.upstream}")
    state = State(args)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state, upstream))
    server.daemon_threads = True
    if args.port_file:
        with open(args.port_file, "w") as f:
            f.write(str(server.server_address[1]))

    def stop(*_):
        state.write_stats()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"fault proxy on 127.0.0.1:{server.server_address[1]} -> {args.upstream}", file=sys.stderr, flush=True)
    server.serve_forever()
    state.write_stats()


if __name__ == "__main__":
    main()

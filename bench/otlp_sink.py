#!/usr/bin/env python3
"""An OTLP/HTTP receiver that accepts traces and drops them, for the benchmarks that run mcpmux
with `[telemetry] otlp_endpoint` (bench/cost.py, bench/callgrind.sh TEAM=1). Standard library only.

    python3 bench/otlp_sink.py PORT

POST /v1/traces: reads the body (Content-Length or chunked, gzip or not), counts the request, its
bytes and the spans in it (a walk over the protobuf `ExportTraceServiceRequest`: resource_spans →
scope_spans → spans), answers 200 with an empty body. GET /stats: those counts as JSON.
"""
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {"requests": 0, "bytes": 0, "spans": 0, "undecoded": 0}
LOCK = threading.Lock()


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def fields(buf):
    """(field number, bytes) of each length-delimited field of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        wire = key & 7
        if wire == 0:
            _, i = varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(buf, i)
            yield key >> 3, buf[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")


def count_spans(body):
    """Spans in an ExportTraceServiceRequest (resource_spans = 1 → scope_spans = 2 → spans = 2)."""
    return sum(1 for fr, rs in fields(body) if fr == 1
               for fs, ss in fields(rs) if fs == 2
               for fp, _ in fields(ss) if fp == 2)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self, status, payload=b"", ctype=None):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self):
        raw = self.body()
        if self.path.split("?")[0] != "/v1/traces":
            self.answer(404)
            return
        try:
            data = gzip.decompress(raw) if self.headers.get("Content-Encoding", "") == "gzip" else raw
            spans, undecoded = count_spans(data), 0
        except (ValueError, IndexError, OSError):
            spans, undecoded = 0, 1
        with LOCK:
            COUNTS["requests"] += 1
            COUNTS["bytes"] += len(raw)
            COUNTS["spans"] += spans
            COUNTS["undecoded"] += undecoded
        self.answer(200)

    def do_GET(self):
        if self.path != "/stats":
            self.answer(404)
            return
        with LOCK:
            payload = json.dumps(COUNTS).encode()
        self.answer(200, payload, "application/json")

    def log_message(self, *_):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4318
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"otlp sink on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

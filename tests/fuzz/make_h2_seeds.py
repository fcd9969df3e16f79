#!/usr/bin/env python3
"""Writes the seed corpus of h2_server_session_fuzz: what a gRPC client sends after the TLS
handshake (connection preface, SETTINGS, HEADERS with HPACK literals, DATA), plus a few
variations the limits care about. Two leading bytes are the fuzzer's mode and seed.
Run from the repository root: python3 tests/fuzz/make_h2_seeds.py"""
import os
import struct

OUT = "tests/fuzz/corpus/h2_server_session"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal(name, value):  # literal without indexing, new name, no Huffman
    return (hpack_int(0, 4, 0x00) + hpack_int(len(name), 7, 0) + name.encode() +
            hpack_int(len(value), 7, 0) + value.encode())


def request_headers(extra=()):
    fields = [(":method", "POST"), (":scheme", "https"),
              (":path", "/akslivepatching.v1.LivePatchingService/GetComponentConfig"),
              (":authority", "myaks-dns.hcp.eastus.azmk8s.io"), ("content-type", "application/grpc"),
              ("te", "trailers"), ("grpc-timeout", "3000m"), ("authorization", "dG9rZW4=")]
    return b"".join(literal(n, v) for n, v in list(fields) + list(extra))


def grpc_message(name=b"aksNodeController", flag=0):
    body = b"\x0a" + bytes([len(name)]) + name
    return bytes([flag]) + struct.pack(">I", len(body)) + body


def call(stream, extra=(), flag=0):
    return (frame(1, 0x4, stream, request_headers(extra)) +
            frame(0, 0x1, stream, grpc_message(flag=flag)))


SETTINGS = frame(4, 0, 0, b"")
seeds = {
    "one_call": PREFACE + SETTINGS + call(1),
    "two_calls": PREFACE + SETTINGS + call(1) + call(3),
    "compressed": PREFACE + SETTINGS + call(1, [("grpc-encoding", "gzip")], flag=1),
    "rapid_reset": PREFACE + SETTINGS + b"".join(
        frame(1, 0x4, s, request_headers()) + frame(3, 0, s, b"\x00\x00\x00\x08")
        for s in range(1, 40, 2)),
    "continuations": PREFACE + SETTINGS + frame(1, 0, 1, request_headers()[:40]) + b"".join(
        frame(9, 0, 1, literal("x-junk-%d" % i, "j" * 40)) for i in range(12)),
    "ping_settings": PREFACE + SETTINGS + b"".join(
        frame(6, 0, 0, b"12345678") + frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x64") for _ in range(30)),
    "window_update": PREFACE + SETTINGS + frame(8, 0, 0, b"\x7f\xff\xff\xff") + call(1),
    "half_open": PREFACE + SETTINGS + frame(1, 0x4, 1, request_headers()) + frame(0, 0, 1, b"\x00\x00"),
}
os.makedirs(OUT, exist_ok=True)
for i, (name, data) in enumerate(sorted(seeds.items())):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([i, 7 * i + 1]) + data)

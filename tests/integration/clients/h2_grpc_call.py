#!/usr/bin/python3
"""One unary GetComponentConfig call made with Python's h2 (Debian's python3-h2), the HTTP/2
layer grpclib is built on, as a node's client would: TLS with ALPN ["aks-live-patching", "h2"],
the cluster CA, the token as `authorization`.

Prints one JSON object: the gRPC status and message from the answer's headers or trailers, the
h2 events in the order h2 reported them, and `error` when h2 raised (a ProtocolError is what an
answer sent after a GOAWAY used to cost this client: issue 31). Exit status 0 when the call
ended with a status, 1 otherwise.

  h2_grpc_call.py --addr 127.0.0.1:8443 --ca ca.pem --server-name api.example --token-file t
"""
import argparse
import json
import socket
import ssl
import sys
import urllib.parse

import h2.config
import h2.connection
import h2.events
import h2.exceptions

PATH = "/akslivepatching.v1.LivePatchingService/GetComponentConfig"


def request_message(component: str) -> bytes:
    # GetComponentConfigRequest{component_name = 1}: one length-delimited field, framed as gRPC
    # (uncompressed flag, 4-byte big-endian length). Names here are far shorter than 128 bytes.
    name = component.encode()
    body = bytes([0x0A, len(name)]) + name
    return b"\x00" + len(body).to_bytes(4, "big") + body


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--component", default="aksNodeController")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()

    host, port = args.addr.rsplit(":", 1)
    with open(args.token_file, encoding="ascii") as f:
        token = f.read().strip()

    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["aks-live-patching", "h2"])
    raw = socket.create_connection((host.strip("[]"), int(port)), timeout=args.timeout)
    sock = context.wrap_socket(raw, server_hostname=args.server_name)

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    stream_id = conn.get_next_available_stream_id()
    conn.send_headers(stream_id, [
        (":method", "POST"), (":scheme", "https"), (":path", PATH),
        (":authority", args.server_name), ("content-type", "application/grpc"),
        ("te", "trailers"), ("authorization", token),
    ])
    conn.send_data(stream_id, request_message(args.component), end_stream=True)
    sock.sendall(conn.data_to_send())

    result = {"alpn": sock.selected_alpn_protocol(), "events": []}
    ended = False
    closed = False
    try:
        # A refusal closes the connection after its answer: read on to the GOAWAY and the end,
        # so the events show their order. An answered call leaves the connection open.
        while not (ended and (closed or result.get("status") == 0)):
            data = sock.recv(65536)
            if not data:
                result["events"].append("eof")
                closed = True
                break
            for event in conn.receive_data(data):
                result["events"].append(type(event).__name__)
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    for name, value in event.headers:
                        name = name.decode() if isinstance(name, bytes) else name
                        value = value.decode() if isinstance(value, bytes) else value
                        if name == "grpc-status":
                            result["status"] = int(value)
                        elif name == "grpc-message":
                            result["message"] = urllib.parse.unquote(value)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
                elif isinstance(event, h2.events.ConnectionTerminated):
                    result["goaway_last_stream"] = event.last_stream_id
                    closed = True
            outgoing = conn.data_to_send()
            if outgoing:
                sock.sendall(outgoing)
    except (h2.exceptions.ProtocolError, OSError) as e:
        result["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(result))
    return 0 if "status" in result and "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())

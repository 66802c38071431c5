"""A code of another coupling protocol version (run as a script, launched by mtrl): it answers
every request with the request's header, its version field one higher than mtrl's, and an
empty JSON spec, as a code built against a newer client would."""

from __future__ import annotations

import sys

import zmq

from mtrl.coupling import protocol as P


def main() -> int:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(sys.argv[1])
    while True:
        head = bytearray(sock.recv_multipart()[0])
        head[4:6] = (P.PROTOCOL_VERSION + 1).to_bytes(2, "little")
        sock.send_multipart([bytes(head), b"{}"])


if __name__ == "__main__":
    sys.exit(main())

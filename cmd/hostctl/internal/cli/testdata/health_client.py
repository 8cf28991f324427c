"""An independent wire client: Debian's python3-msgpack, not hostkit's code.

Usage: health_client.py SOCKET VECTORS_JSON
Checks that msgpack-python encodes the health_request vector byte for byte,
then sends a health request to SOCKET and prints the decoded answer as JSON.
"""
import json
import os
import socket
import struct
import sys
import time

import msgpack


def pack(value):
    # Canonical form: keys sorted bytewise; msgpack-python already uses the
    # shortest int and length forms and bin for bytes (use_bin_type).
    def canon(v):
        if isinstance(v, dict):
            return {k: canon(v[k]) for k in sorted(v, key=lambda s: s.encode())}
        if isinstance(v, list):
            return [canon(x) for x in v]
        return v
    return msgpack.packb(canon(value), use_bin_type=True)


def main():
    path, vectors = sys.argv[1], sys.argv[2]
    with open(vectors) as f:
        vec = {v["name"]: v for v in json.load(f)["valid"]}["health_request"]
    want = bytes.fromhex(vec["hex"])
    v = vec["value"]
    got = pack({"v": v["v"], "id": bytes.fromhex(v["id"]["bin_hex"]), "op": v["op"], "deadline": v["deadline"]})
    if got != want:
        print(json.dumps({"vector_mismatch": got.hex()}))
        sys.exit(2)

    req = pack({"v": 1, "id": os.urandom(16), "op": "health", "deadline": int(time.time() * 1000) + 5000, "corr": "py-interop"})
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(struct.pack(">I", len(req)) + req)
    n = struct.unpack(">I", recv_exact(s, 4))[0]
    resp = msgpack.unpackb(recv_exact(s, n), raw=False, strict_map_key=True)
    resp["id"] = resp["id"].hex()
    print(json.dumps(resp, sort_keys=True))


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


if __name__ == "__main__":
    main()

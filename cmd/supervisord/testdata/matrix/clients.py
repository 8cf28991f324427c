"""clients.py: one Python HTTP client with the placeholder in
Authorization, as an agent would use it: requests, httpx (trust_env, its
default), aiohttp (default: ignores the proxy variables) or aiohttp-env
(trust_env=True); raw is a plain TCP client (echo) that ignores them all.
Usage: python3 clients.py CLIENT; $U is the server, $TOKEN the
placeholder. Prints the status and body; exits 1 on any error."""
import asyncio, os, socket, sys
from urllib.parse import urlsplit

u, tok = os.environ["U"], os.environ.get("TOKEN", "")
hdrs = {"Authorization": "Bearer " + tok}


def done(status, body):
    print("status=%s body=%s" % (status, body.strip()))
    sys.exit(0 if status == 200 else 1)


async def aio(trust_env):
    import aiohttp
    async with aiohttp.ClientSession(trust_env=trust_env) as s:
        async with s.get(u + "/aiohttp", headers=hdrs, timeout=aiohttp.ClientTimeout(total=30)) as r:
            return r.status, await r.text()


def main(client):
    if client == "requests":
        import requests
        r = requests.get(u + "/requests", headers=hdrs, timeout=30)
        done(r.status_code, r.text)
    elif client == "httpx":
        import httpx
        r = httpx.get(u + "/httpx", headers=hdrs, timeout=30)
        done(r.status_code, r.text)
    elif client in ("aiohttp", "aiohttp-env"):
        done(*asyncio.run(aio(client == "aiohttp-env")))
    elif client == "raw":
        p = urlsplit(u)
        with socket.create_connection((p.hostname, p.port), timeout=30) as c:
            line = "ping %s\n" % p.path  # the path names the row to the echo server
            c.sendall(line.encode())
            got = c.makefile("rb").readline().decode()
        print("echo=" + got.strip())
        sys.exit(0 if got == line else 1)


try:
    main(sys.argv[1])
except Exception as e:  # the outcome is the output: one line, the error's type and text
    print("error=%s: %s" % (type(e).__name__, e))
    sys.exit(1)

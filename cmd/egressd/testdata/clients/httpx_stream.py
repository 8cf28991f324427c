"""httpx_stream.py: a streaming POST through egressd with Debian's httpx.

Usage: /usr/bin/python3 httpx_stream.py URL 'Header: value'...
httpx's trust_env (the default) takes the proxy from https_proxy and the
CA from SSL_CERT_FILE. Prints every server-sent event's data as one line
as it arrives; exits 1 on any error or a status other than 200.
"""

import sys

import httpx


def main():
    if len(sys.argv) < 2:
        print("usage: httpx_stream.py URL [Header: value]...", file=sys.stderr)
        return 2
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    for h in sys.argv[2:]:
        name, _, value = h.partition(":")
        headers[name.strip()] = value.strip()
    body = {"model": "test", "stream": True, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    try:
        with httpx.stream("POST", sys.argv[1], headers=headers, json=body, timeout=30) as r:
            if r.status_code != 200:
                r.read()
                raise RuntimeError(f"status {r.status_code}: {r.text}")
            for line in r.iter_lines():
                if line.startswith("data:"):
                    print(line[5:].strip(), flush=True)
    except Exception as e:  # any failure is the test's failure
        print(f"httpx_stream: {e!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

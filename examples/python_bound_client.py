"""Calls an API behind Keygate from Python with a token bound to its request: PyJWT
(pip install pyjwt, or Debian python3-jwt). See docs/contract.md, "Binding a token to its request".

Usage: python3 examples/python_bound_client.py METHOD URL API_KEY API_SECRET [BODY_FILE]
e.g.   python3 examples/python_bound_client.py POST http://127.0.0.1:8000/api/v3/orders kg_... secret order.json
"""
import base64
import hashlib
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import jwt


def body_sha256(body: bytes) -> str:
    # base64url without padding of SHA-256 of the exact bytes sent.
    return base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()


def make_bound_token(api_key: str, api_secret: str, method: str, target: str, body: bytes | None) -> str:
    payload = {
        "type": "OpenAPIV2",
        "sub": api_key,
        "nonce": str(time.time_ns()),
        "method": method.upper(),
        # The target exactly as it goes in the request line: path and query, percent-encoding as sent.
        "path": target,
    }
    if body is not None:
        payload["body_sha256"] = body_sha256(body)
    # The secret is used as-is (its plain string), never Base64-decoded.
    return jwt.encode(payload, api_secret, algorithm="HS256", headers={"typ": "JWT"})


def main() -> int:
    method, url, api_key, api_secret = sys.argv[1:5]
    body = None
    if len(sys.argv) > 5:
        with open(sys.argv[5], "rb") as f:
            body = f.read()
    # urllib sends the URL's path and query as they are written: sign exactly that.
    parts = urllib.parse.urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    token = make_bound_token(api_key, api_secret, method, target, body)
    headers = {"Authorization": f"Bearer {token}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, method=method.upper(), headers=headers)
    try:
        with urllib.request.urlopen(request) as response:
            print(response.status, response.read().decode())
    except urllib.error.HTTPError as err:
        print(err.code, err.read().decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

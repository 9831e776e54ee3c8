"""Calls an API behind Keygate from Python with PyJWT (pip install pyjwt, or Debian python3-jwt).

Usage: python3 examples/python_client.py http://127.0.0.1:8000/api/v3/viewer/accounts API_KEY API_SECRET
"""
import sys
import time
import urllib.error
import urllib.request

import jwt


def make_token(api_key: str, api_secret: str, recv_window: int | None = None) -> str:
    payload = {"type": "OpenAPIV2", "sub": api_key, "nonce": str(time.time_ns())}
    if recv_window is not None:
        payload["recv_window"] = str(recv_window)
    # The secret is used as-is (its plain string), never Base64-decoded.
    return jwt.encode(payload, api_secret, algorithm="HS256", headers={"typ": "JWT"})


def main() -> int:
    url, api_key, api_secret = sys.argv[1:4]
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {make_token(api_key, api_secret)}"})
    try:
        with urllib.request.urlopen(request) as response:
            print(response.status, response.read().decode())
    except urllib.error.HTTPError as err:
        print(err.code, err.read().decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Calls an API behind Keygate from Python with an EdDSA or ES256 key: PyJWT with `cryptography`
(pip install "pyjwt[crypto]", or Debian python3-jwt python3-cryptography).

Usage: python3 examples/python_signed_client.py http://127.0.0.1:8000/api/v3/viewer/accounts API_KEY PRIVATE_KEY_PEM_FILE
"""
import sys
import time
import urllib.error
import urllib.request

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import load_pem_private_key


def make_token(api_key: str, private_key, recv_window: int | None = None) -> str:
    # The same claims as an HS256 token; only the signature differs.
    payload = {"type": "OpenAPIV2", "sub": api_key, "nonce": str(time.time_ns())}
    if recv_window is not None:
        payload["recv_window"] = str(recv_window)
    # The alg must be the key's: Ed25519 signs EdDSA, P-256 signs ES256 (PyJWT writes r||s, as JWS requires).
    algorithm = "EdDSA" if isinstance(private_key, ed25519.Ed25519PrivateKey) else "ES256"
    return jwt.encode(payload, private_key, algorithm=algorithm, headers={"typ": "JWT"})


def main() -> int:
    url, api_key, key_file = sys.argv[1:4]
    with open(key_file, "rb") as f:
        private_key = load_pem_private_key(f.read(), password=None)
    if not isinstance(private_key, (ed25519.Ed25519PrivateKey, ec.EllipticCurvePrivateKey)):
        print("not an Ed25519 or P-256 private key", file=sys.stderr)
        return 2
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {make_token(api_key, private_key)}"})
    try:
        with urllib.request.urlopen(request) as response:
            print(response.status, response.read().decode())
    except urllib.error.HTTPError as err:
        print(err.code, err.read().decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

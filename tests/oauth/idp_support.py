"""The tests' identity provider (tests/oauth/idp_server.py) as a real uvicorn process, and its client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from joserfc.jwk import RSAKey

from tests.e2e.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60.0


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class IdentityProvider:
    """One running authorization server: its issuer URL and what the tests ask of it."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.proc = proc
        self.log = log

    @property
    def jwks_uri(self) -> str:
        return f"{self.url}/jwks"

    @property
    def introspection_url(self) -> str:
        return f"{self.url}/introspect"

    def claims(self, audience: str, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.url, "sub": "user-1", "aud": audience, "client_id": "app", "scope": "mcp",
                "iat": now, "exp": now + 300} | extra  # fmt: skip

    def mint(self, claims: dict[str, Any], kid: str | None = None, opaque: bool = False) -> str:
        body: dict[str, Any] = {"claims": claims, "kid": kid, "opaque": opaque}
        return httpx.post(f"{self.url}/test/mint", json=body, timeout=10).json()["access_token"]

    def token(self, resource: str, scope: str = "mcp", subject: str = "user-1", opaque: bool = False) -> str:
        """A token by the client credentials grant, as a client gets one."""
        form = {"grant_type": "client_credentials", "resource": resource, "scope": scope, "subject": subject}
        if opaque:
            form["token_format"] = "opaque"
        answer = httpx.post(f"{self.url}/token", data=form, auth=("app", "app-secret"), timeout=10)
        answer.raise_for_status()
        return answer.json()["access_token"]

    def revoke(self, token: str) -> None:
        httpx.post(f"{self.url}/revoke", data={"token": token}, auth=("app", "app-secret"), timeout=10)

    def rotate(self) -> str:
        return httpx.post(f"{self.url}/test/rotate", timeout=30).json()["kid"]

    def stats(self) -> dict[str, Any]:
        return httpx.get(f"{self.url}/test/stats", timeout=10).json()

    def public_key_pem(self) -> bytes:
        """The current public key as PEM, what an attacker signs HS256 with."""
        key = httpx.get(self.jwks_uri, timeout=10).json()["keys"][0]
        return RSAKey.import_key(key).as_pem(private=False)

    def unsigned(self, claims: dict[str, Any], alg: str = "none", secret: bytes = b"") -> str:
        """A token the provider never signed: `alg: none`, or HS256 with `secret` (its public key)."""
        header = b64(json.dumps({"alg": alg, "typ": "JWT", "kid": self.stats()["kid"]}).encode())
        payload = b64(json.dumps(claims).encode())
        signing_input = f"{header}.{payload}".encode()
        signature = b64(hmac.new(secret, signing_input, hashlib.sha256).digest()) if secret else ""
        return f"{header}.{payload}.{signature}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextmanager
def running_identity_provider() -> Iterator[IdentityProvider]:
    """Start tests/oauth/idp_server.py under uvicorn on a free port; stop it afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="idp-", suffix=".log")[1])
    env = {**os.environ, "IDP_ISSUER": url, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "tests.oauth.idp_server:app", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    idp = IdentityProvider(url, proc, log)
    deadline = time.monotonic() + STARTUP_SECONDS
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the identity provider exited:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/.well-known/oauth-authorization-server", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the identity provider did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield idp
    finally:
        idp.stop()

"""Every secret this process holds, wherever it came from, and `redact` to scrub them from a message.

Environment variables are not the only source: with keys in a shared credentials file, `-vv`
printed the session token 14 times (botocore logs what it signs with). So the set also holds every
key of the credentials and config files (all profiles), the credentials botocore resolves, and any
value registered with `register_secret`; and the userinfo of URIs (`postgresql://u:pw@host`) is
masked in any text.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
import threading
from pathlib import Path

SECRET_ENV_VARS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "DISTRL_JUDGE_API_KEY",
    "DISTRL_LEARNER_RANK_KEY",  # admits learner ranks and encrypts what rank 0 sends them
    "PGPASSWORD",  # libpq's and asyncpg's; `distrl up --database postgres` hands its servers one
)
_FILE_KEYS = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
    "aws_security_token": "AWS_SESSION_TOKEN",
}
# scheme://userinfo@ — the userinfo (user, password or token) is masked whole.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"<>]+@")
_MIN_LEN = 4  # shorter values would scrub ordinary words

_registered: dict[str, str] = {}
_cache: dict[tuple, dict[str, str]] = {}
_lock = threading.Lock()
_resolving = threading.local()


def register_secret(value: str | None, label: str) -> None:
    """A secret that reached this process some other way (e.g. storage options); scrubbed from now on."""
    if value and len(value) >= _MIN_LEN:
        _registered[value] = label


def _credential_files() -> list[Path]:
    home = Path.home() / ".aws"
    return [
        Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials").expanduser(),
        Path(os.environ.get("AWS_CONFIG_FILE") or home / "config").expanduser(),
    ]


def _from_files(paths: list[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in paths:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path)
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        for section in parser.sections():
            for key, label in _FILE_KEYS.items():
                value = parser.get(section, key, fallback=None)
                if value:
                    found[value.strip()] = label
    return found


def _from_botocore() -> dict[str, str]:
    """What botocore would sign with, from its local providers (no instance or container metadata
    lookups: those wait on the network, and a process using them has botocore log nothing else)."""
    try:
        import botocore.credentials  # type: ignore[import-untyped]
        import botocore.session  # type: ignore[import-untyped]

        resolver = botocore.credentials.create_credential_resolver(botocore.session.Session())
        for remote in ("container-role", "iam-role"):
            resolver.remove(remote)
        credentials = resolver.load_credentials()
    except Exception:  # a broken profile must not break logging; the files above still count
        return {}
    if credentials is None:
        return {}
    frozen = credentials.get_frozen_credentials()
    pairs = (
        (frozen.access_key, "AWS_ACCESS_KEY_ID"),
        (frozen.secret_key, "AWS_SECRET_ACCESS_KEY"),
        (frozen.token, "AWS_SESSION_TOKEN"),
    )
    return {value: label for value, label in pairs if value}


def _stamp(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def known_secrets() -> dict[str, str]:
    """Secret value → the name shown instead. Recomputed only when the environment or a file changes."""
    files = _credential_files()
    env = tuple(os.environ.get(n) for n in (*SECRET_ENV_VARS, "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE"))
    key = (env, tuple((str(p), _stamp(p)) for p in files), "botocore" in sys.modules)
    secrets = _cache.get(key)
    if secrets is None:
        secrets = _from_files(files)
        # botocore logs while it resolves, and each record comes back here: the inner calls use the
        # files' keys (the resolution reads the same files) rather than resolve again or wait.
        if "botocore" in sys.modules and not getattr(_resolving, "active", False):
            _resolving.active = True
            try:
                secrets |= _from_botocore()
            finally:
                _resolving.active = False
            with _lock:
                _cache.clear()
                _cache[key] = secrets
    secrets = dict(secrets)
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name)
        if value:
            secrets[value] = name
    secrets |= _registered
    return {v: label for v, label in secrets.items() if len(v) >= _MIN_LEN}


def redact(text: str) -> str:
    """`text` without any known secret value (each shown as `<NAME>`) or URI userinfo (`***@`)."""
    # Longest first: a key that contains another is replaced whole.
    for value, label in sorted(known_secrets().items(), key=lambda item: -len(item[0])):
        text = text.replace(value, f"<{label}>")
    return _USERINFO.sub(r"\g<scheme>***@", text)

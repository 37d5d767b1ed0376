"""What rank 0 of the learner tells its followers: sealed, pickle-free messages sent as tensors.

A message is a JSON header, numpy arrays (``.npy`` with ``allow_pickle=False``) and at most one
Arrow table (an IPC stream), framed and sealed with AES-256-GCM (encrypted and authenticated) under
the learner's key: one that rank 0 draws for each run and hands to the followers it starts in
their environment (`KEY_ENV`: never argv, which every user can read in ``/proc``, and never the
store), or, with followers on other hosts, one the operator gives every learner host in that
variable. It travels as a ``uint8`` tensor in a broadcast over the process group's own
connections, so the store carries no payload at all: a process without the key that reaches the
store or a rank's socket can stop the learner, but can neither read the policy or a batch nor make
a rank decode, let alone run, anything of its own.

    key = new_key()
    blob = seal(key, {"kind": "update", "updates": 3}, {"keys": slots}, rows)
    message = unseal(key, broadcast_bytes(blob, device))  # on every rank
"""

from __future__ import annotations

import hmac
import io
import json
import os
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import torch
import torch.distributed as dist
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KEY_ENV",
    "Message",
    "SealError",
    "broadcast_bytes",
    "join_proof",
    "key_from_env",
    "new_key",
    "seal",
    "unseal",
]

KEY_ENV = "DISTRL_LEARNER_RANK_KEY"  # 64 hex digits; rank 0 sets it for the ranks it starts
KEY_BYTES = 32
MAGIC = b"DRLRANK2"
_NONCE_BYTES = 12  # AES-GCM's; random per message (2^-32 collision odds only after ~2^32 messages)
_LENGTH = struct.Struct("<Q")


class SealError(ValueError):
    """A message that was not sealed with this run's key, or is malformed."""


@dataclass(frozen=True)
class Message:
    header: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    table: pa.Table | None = None


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def key_from_env(required: bool = True) -> bytes | None:
    """The learner's key from `KEY_ENV` (None when unset and not `required`)."""
    raw = os.environ.get(KEY_ENV, "")
    if not raw and not required:
        return None
    try:
        key = bytes.fromhex(raw)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise RuntimeError(
            f"{KEY_ENV} is missing or not {KEY_BYTES} hex-encoded bytes: set the same value on every "
            "learner host (e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`); rank 0 "
            "sets it itself for the followers it starts on its own host"
        )
    return key


def join_proof(key: bytes, nonce: bytes, ticket: int) -> bytes:
    """What a follower shows to be admitted with `ticket`: it holds the key (the nonce is the run's)."""
    return hmac.digest(key, nonce + ticket.to_bytes(8, "little"), "sha256")


def seal(
    key: bytes,
    header: dict[str, Any],
    arrays: dict[str, np.ndarray] | None = None,
    table: pa.Table | None = None,
) -> bytes:
    """The framed, tagged bytes of one message (header: JSON-serialisable plain data)."""
    arrays = arrays or {}
    head = dict(header, _arrays=list(arrays), _table=table is not None)
    parts = [json.dumps(head, allow_nan=False).encode()]
    for name in arrays:
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(arrays[name]), allow_pickle=False)
        parts.append(buffer.getvalue())
    if table is not None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        parts.append(sink.getvalue().to_pybytes())
    body = b"".join(_LENGTH.pack(len(p)) + p for p in parts)
    nonce = secrets.token_bytes(_NONCE_BYTES)
    return MAGIC + nonce + AESGCM(key).encrypt(nonce, body, MAGIC)


def unseal(key: bytes, blob: bytes) -> Message:
    """The message in `blob`; `SealError` before any byte is decoded unless it was sealed with `key`."""
    if blob[: len(MAGIC)] != MAGIC or len(blob) < len(MAGIC) + _NONCE_BYTES + 16:
        raise SealError("not a learner-rank message (wrong magic or truncated)")
    nonce = blob[len(MAGIC) : len(MAGIC) + _NONCE_BYTES]
    try:
        body = AESGCM(key).decrypt(nonce, blob[len(MAGIC) + _NONCE_BYTES :], MAGIC)
    except InvalidTag:
        raise SealError(
            "a learner-rank message failed authentication (not sealed with this run's key)"
        ) from None
    parts = _split(body)
    head = json.loads(parts[0])
    names, has_table = head.pop("_arrays"), head.pop("_table")
    if len(parts) != 1 + len(names) + int(has_table):
        raise SealError(f"a learner-rank message has {len(parts)} parts, its header names {len(names)}")
    arrays = {n: np.load(io.BytesIO(p), allow_pickle=False) for n, p in zip(names, parts[1:], strict=False)}
    table = pa.ipc.open_stream(pa.py_buffer(parts[-1])).read_all() if has_table else None
    return Message(head, arrays, table)


def _split(body: bytes) -> list[bytes]:
    parts, at = [], 0
    while at < len(body):
        if at + _LENGTH.size > len(body):
            raise SealError("a learner-rank message is truncated")
        (size,) = _LENGTH.unpack_from(body, at)
        at += _LENGTH.size
        if at + size > len(body):
            raise SealError("a learner-rank message is truncated")
        parts.append(body[at : at + size])
        at += size
    if not parts:
        raise SealError("an empty learner-rank message")
    return parts


def broadcast_bytes(blob: bytes | None, device: torch.device) -> bytes:
    """Rank 0's `blob` on every rank (followers pass None), over the process group's connections.
    Two broadcasts: the length (int64), then the bytes (uint8; on `device`, since NCCL moves CUDA
    tensors only)."""
    size = torch.tensor([len(blob) if blob is not None else 0], dtype=torch.int64, device=device)
    dist.broadcast(size, src=0)
    if blob is not None:
        data = torch.frombuffer(bytearray(blob), dtype=torch.uint8).to(device)
    else:
        data = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    dist.broadcast(data, src=0)
    return data.cpu().numpy().tobytes()

"""The shard contract (docs/shard-contract.md).

shard(personId, N) = first 4 bytes of SHA-256(UTF-8(personId)), unsigned big-endian, mod N.
No Unicode normalisation and no case folding: the bytes the caller stored are the bytes hashed,
so every language that touches the table computes the same shard from the same string.
"""

from __future__ import annotations

import hashlib

from saga_index.index.errors import InvalidPersonIdError, InvalidShardCountError

# The N of a first migration, and of every reader that is told no other.
DEFAULT_SHARD_COUNT = 16
MAX_SHARD_COUNT = 1024


def validate_shard_count(shard_count: object) -> int:
    """Return shard_count if it is a power of two in [1, 1024], else raise naming the problem.

    Powers of two make resharding a split: shard(p, 2N) is shard(p, N) or shard(p, N) + N.
    """
    if isinstance(shard_count, bool) or not isinstance(shard_count, int):
        raise InvalidShardCountError(
            f"shard count must be an integer power of two from 1 to {MAX_SHARD_COUNT}, "
            f"got {shard_count!r}"
        )
    if not 1 <= shard_count <= MAX_SHARD_COUNT or shard_count & (shard_count - 1):
        raise InvalidShardCountError(
            f"shard count must be a power of two from 1 to {MAX_SHARD_COUNT}, got {shard_count}"
        )
    return shard_count


def shard(person_id: str, shard_count: int = DEFAULT_SHARD_COUNT) -> int:
    """The shard of a personId under N = shard_count."""
    validate_shard_count(shard_count)
    return shard_hash(person_id) % shard_count


def shard_hash(person_id: str) -> int:
    """The first 4 bytes of SHA-256(UTF-8(personId)), unsigned big-endian: the shard under any
    N is this mod N, so a reader of two layouts hashes a person once."""
    if not isinstance(person_id, str) or not person_id:
        raise InvalidPersonIdError(f"personId must be a non-empty string, got {person_id!r}")
    try:
        encoded = person_id.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidPersonIdError(f"personId is not valid Unicode text: {err}") from err
    return utf8_shard_hash(encoded)


def utf8_shard_hash(encoded: bytes) -> int:
    """shard_hash of a personId already checked and encoded (saga_index.index.keys.Person)."""
    return int.from_bytes(hashlib.sha256(encoded).digest()[:4], "big")

"""Sending hand-packed RESP commands on redis-py connections, several in one write.

The chain worker's answers and its ack ledger's flushes are packed by hand
(:mod:`hookbus.bus.resp`): redis-py's general packer and pipeline were the
worker's largest costs on those paths. This module writes such a batch at once and reads
every reply, error replies kept in place as exception objects.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.exceptions

from hookbus.bus.resp import EXEC, MULTI

#: Socket timeout while reading replies on a raw connection, in s: a blocking read (at most
#: 0.5 s, see chain_reader.READ_BLOCK_MS) plus room for a busy server.
RAW_READ_TIMEOUT_S = 10.5
__all__ = ["EXEC", "MULTI", "RAW_READ_TIMEOUT_S", "read_replies", "send_pooled", "send_raw"]


def send_raw(conn: Any, commands: list[bytes]) -> list[Any]:
    """Write packed ``commands`` at once on ``conn`` and read every reply."""
    conn.send_packed_command([b"".join(commands)], check_health=False)
    return read_replies(conn, len(commands))


def read_replies(conn: Any, n: int) -> list[Any]:
    """Read ``n`` replies; error replies come back as exception objects, in place."""
    results: list[Any] = []
    for _ in range(n):
        try:
            results.append(conn.read_response(timeout=RAW_READ_TIMEOUT_S))
        except redis.exceptions.ResponseError as exc:
            results.append(exc)
    return results


def send_pooled(client: redis.Redis, commands: list[bytes]) -> list[Any]:
    """:func:`send_raw` on a connection of ``client``'s pool, given back after."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        return send_raw(conn, commands)
    finally:
        pool.release(conn)

"""The real app factories of the HTTP services, served on loopback TestServers for a test."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


@asynccontextmanager
async def app_clients(create_app: Callable[[C], web.Application], base: C) -> AsyncIterator[MakeClient]:
    """``make(**changes)``: a client of ``create_app(base with changes)`` on a loopback
    TestServer (``base`` is a dataclass config); every client made is closed on exit."""
    clients: list[TestClient[Any, Any]] = []

    async def make(**changes: Any) -> TestClient[Any, Any]:
        app = create_app(dataclasses.replace(base, **changes))
        client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    try:
        yield make
    finally:
        for client in clients:
            await client.close()

"""How long an HTTP connection to curaflow's API stays open between requests, at both ends.

The API closes a connection idle for :data:`API_KEEP_ALIVE_S` (uvicorn's
``timeout_keep_alive``, set from here by every server of the API). A client that keeps an
idle connection as long sends its next request, at that moment, on a connection the server
is closing: the request is written, the server's close arrives, and the client reads a
connection error — a request neither refused nor answered (RFC 9112 §9.5: a server may close
an inactive connection at any time; a client must be ready for it). httpx keeps an idle
connection 5 s by default, as long as uvicorn's: a ``POST /jobs`` sent then failed
(2026-12-07, the suite's ``tests/integration/test_activity_pause.py``). So curaflow's typed
client (:class:`curaflow.client.CuraflowClient`) keeps one :data:`CLIENT_KEEP_ALIVE_S`,
half the server's: it lets the connection go well before the server does.
"""

from __future__ import annotations

#: Seconds the API keeps an idle connection open (uvicorn's ``timeout_keep_alive``, an int).
API_KEEP_ALIVE_S = 5
#: Seconds curaflow's client keeps an idle connection to the API: half the API's time.
CLIENT_KEEP_ALIVE_S = API_KEEP_ALIVE_S / 2

"""``contextvec serve``: an encoder's contextual vectors over HTTP.

Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client): ``pip install "contextvec[server]"``;
without it, importing this package raises `contextvec.extras.MissingExtra` saying so.
`create_app` (in ``contextvec.server.app``) builds the ASGI app around a loaded encoder; the
engine below it (``contextvec.engine``) batches different clients' sentences together.
"""

from contextvec.extras import needs

with needs("server"):  # the packages this package's modules import
    import fastapi  # noqa: F401
    import orjson  # noqa: F401
    import prometheus_client  # noqa: F401
    import pybase64  # noqa: F401

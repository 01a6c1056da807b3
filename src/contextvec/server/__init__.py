"""``contextvec serve``: an encoder's contextual vectors over HTTP.

Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client): ``pip install "contextvec[server]"``.
`create_app` (in ``contextvec.server.app``) builds the ASGI app around a loaded encoder; the
``Batcher`` (``contextvec.server.batcher``) batches different clients' sentences together.
"""

"""``contextvec serve``: an encoder's contextual vectors over HTTP.

Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client): ``pip install "contextvec[server]"``.
:func:`~contextvec.server.app.create_app` builds the ASGI app around a loaded encoder; the
:class:`~contextvec.server.batcher.Batcher` batches different clients' sentences together.
"""

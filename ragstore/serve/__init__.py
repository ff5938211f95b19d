"""``ragstore serve``: the HTTP JSON API (:mod:`ragstore.serve.app`) and its bearer tokens
(:mod:`ragstore.serve.tokens`). The app needs the ``server`` extra (FastAPI, uvicorn); the tokens do not."""

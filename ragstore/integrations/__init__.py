"""Adapters for RAG frameworks: :mod:`ragstore.integrations.langchain` (extra ``[langchain]``) and
:mod:`ragstore.integrations.llamaindex` (extra ``[llamaindex]``). Both keep their vectors in an
``external`` family (the application's embedding model computes them) through :mod:`._family`."""

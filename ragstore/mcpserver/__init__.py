"""``ragstore mcp``: ragstore's tools for agents over the Model Context Protocol (the ``mcp`` SDK, stdio).

The package is named ``mcpserver`` so that ``import mcp`` always means the SDK. :mod:`.tools` holds the
tool functions on a :class:`ragstore.Store`; :mod:`.server` registers them on an ``MCPServer``.
"""

"""Sans-IO protocol codecs.

``registry.CODECS`` maps a protocol name (``memcache-text``, ``memcache-binary``,
``memcache-meta``, ``resp2``, ``resp3``, ``http-memc``) to a ``CodecSpec``. Codecs import only the
standard library, hiredis and ``kvbench.errors``; nothing here does I/O.
"""

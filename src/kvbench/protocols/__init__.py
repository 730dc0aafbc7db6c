"""Sans-IO protocol codecs."""

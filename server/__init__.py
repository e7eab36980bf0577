"""Autocomp's language server (pygls 2.x): ``autocomp lsp`` runs :func:`main`."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    """Serve LSP over stdio, or over TCP with ``--tcp HOST:PORT`` (for debugging)."""
    parser = argparse.ArgumentParser(prog="autocomp lsp", description="Run the Autocomp language server.")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio (debugging)")
    parser.add_argument("--stdio", action="store_true", help="speak LSP on stdin/stdout (the default)")
    parser.add_argument("--log-level", default="WARNING", help="stderr log level (DEBUG, INFO, WARNING)")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="autocomp-lsp %(levelname)s %(name)s: %(message)s")

    from autocomp.server.app import build_server

    server = build_server()
    if args.tcp:
        host, sep, port = args.tcp.rpartition(":")
        if not sep or not port.isdigit():
            parser.error(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087; got {args.tcp!r}")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
    return 0


__all__ = ["main"]

"""The ``autocomp`` command: optimize, eval, tune, runs, show, doctor, lsp."""

from __future__ import annotations

import argparse
import sys

from autocomp import __version__
from autocomp.cli import doctor, evaluate, optimize, runs, tune
from autocomp.backends import BackendError
from autocomp.cli.common import EXIT_USAGE, err
from autocomp.errors import UserError


def _lsp(args: argparse.Namespace) -> int:
    from autocomp.server import main as server_main

    return int(server_main(args.server_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autocomp", description="LLM-driven, evaluator-verified kernel optimization.")
    parser.add_argument("--version", action="version", version=f"autocomp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    optimize.add_parser(sub)
    evaluate.add_parser(sub)
    tune.add_parser(sub)
    runs.add_parsers(sub)
    doctor.add_parser(sub)
    lsp = sub.add_parser("lsp", help="run the language server (stdio; --tcp HOST:PORT for debugging)", add_help=False)
    lsp.set_defaults(handler=_lsp)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # The server parses its own options (--tcp, --log-level, --help): hand them over whole.
    args, extra = parser.parse_known_args(argv)
    if args.command == "lsp":
        args.server_args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.handler(args))
    except (UserError, BackendError) as exc:  # one line for the user, exit 2 (autocomp.errors)
        err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    except BrokenPipeError:  # `autocomp ... | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""The root of every error meant for the user.

An ``UserError`` carries one line that says what went wrong and how to fix it; the CLI prints
it as ``autocomp: MESSAGE`` and exits 2, the server shows it once as a message. Anything
else escaping is a bug and gets a traceback. Subclasses: ``CliError``, ``ConfigError``,
``LLMConfigError``, ``StoreError``, ``BackendError`` (what targets raise, in
backends/base.py), ``RunSetupError``, ``Conflict``, ``ReuseError``, ``SettingError``.
"""

from __future__ import annotations


class UserError(Exception):
    """A message for the user and nothing else (no traceback)."""

"""The one error type users see: its message says what is wrong and how to fix it."""


class CpdecompError(ValueError):
    """Bad input or an impossible request; the message is meant for the user, in one line."""

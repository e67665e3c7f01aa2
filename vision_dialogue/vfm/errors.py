"""Errors the VFM tools raise; the server turns them into a failed result with the message."""


class ToolError(RuntimeError):
    """A tool could not do its job (bad input, inference failure); the message says why."""


class ModelMissingError(ToolError):
    """A checkpoint is neither a local path nor in the local Hugging Face cache."""


class UnknownToolError(ToolError):
    """An op id this server does not offer."""


class Cancelled(Exception):
    """The goal was cancelled; raised between steps."""

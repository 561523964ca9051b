"""FaithJudge: verified faithfulness scores for chain-of-thought explanations of medical VLMs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("faithjudge")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]

"""The installed version of the SDK (sent in its user agent)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("faithjudge-client")
except PackageNotFoundError:
    try:  # shipped inside the service's own distribution
        __version__ = version("faithjudge")
    except PackageNotFoundError:  # a source tree that was never installed
        __version__ = "0.0.0+source"

"""The version of nhfast, kept here only: pyproject.toml and ``nhfast.__version__`` read it."""

__version__ = "0.1.0"

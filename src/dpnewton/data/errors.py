"""The single exception type raised for every user-facing data problem."""

from __future__ import annotations


class DatasetError(ValueError):
    """A dataset could not be found, verified, parsed or validated.

    The message always names the problem, the file involved and how to fix it.
    """

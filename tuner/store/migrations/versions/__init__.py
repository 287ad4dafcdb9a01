"""Revisions of the tuner store; Alembic loads these files by path (this file is skipped)."""

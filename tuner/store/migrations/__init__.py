"""Alembic migrations of the tuner store, run by :func:`tuner.store.upgrade` (no alembic.ini needed).

``env.py`` takes the connection to migrate from ``config.attributes["connection"]`` (or opens
``sqlalchemy.url``), ``versions/`` holds one revision per schema version (see
:mod:`tuner.store.schema`). Revision ids are the zero-padded schema version they lead to. A new
revision, from ``script.py.mako``::

    python -c "from alembic import command; from tuner.store.migrate import alembic_config; \\
        command.revision(alembic_config(), 'what changes', rev_id='0003')"
"""

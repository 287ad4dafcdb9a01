"""Where sweeps live: the storage path, a sweep's run directory, its store and its saved spec."""

from __future__ import annotations

import dataclasses
import os
import shlex
from pathlib import Path
from typing import Any

from tuner.cli.errors import EXIT_FAILED, EXIT_USAGE, CLIError

#: tune.run's default (``tuner.api.DEFAULT_STORAGE_PATH``; not imported from there: that pulls in Ray).
DEFAULT_STORAGE_PATH = "~/tuner_results"
#: The environment variable that moves the default storage path of every verb and spec.
STORAGE_ENV = "TUNER_STORAGE_PATH"
#: The spec a sweep was started with, saved in its run directory for ``tuner resume``.
SPEC_FILE = "sweep.yaml"
DB_FILE = "tuner.db"
#: Under the default storage path: the run directories of sweeps stored elsewhere, by name, so
#: ``tuner show/best/export/resume NAME`` find a sweep whatever storage path its spec named.
INDEX_FILE = ".sweep_locations.json"


def default_storage_path() -> str:
    """``$TUNER_STORAGE_PATH``, else tune.run's default (``~/tuner_results``)."""
    return os.environ.get(STORAGE_ENV) or DEFAULT_STORAGE_PATH


def has_password(url: str | None) -> bool:
    """Whether a database URL carries a password (it must then never be written or shown)."""
    if not url:
        return False
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password is not None
    except Exception:  # noqa: BLE001 - not a URL: nothing to hide that mask_url would not
        return "@" in url


@dataclasses.dataclass(frozen=True)
class SweepRef:
    """A sweep: its name, its run directory and the database that holds it (None: SQLite there)."""

    name: str
    run_dir: Path
    database_url: str | None = None

    @property
    def url(self) -> str:
        from tuner.store import default_database_url

        return self.database_url or default_database_url(self.run_dir)

    @property
    def url_for_display(self) -> str:
        from tuner.store import mask_url

        return mask_url(self.url)

    @property
    def spec_file(self) -> Path:
        return self.run_dir / SPEC_FILE


def read_saved_spec(run_dir: Path) -> dict[str, Any] | None:
    """The spec document ``tuner sweep`` saved in ``run_dir``, or None."""
    from tuner.cli.yaml_io import load_spec_file

    path = run_dir / SPEC_FILE
    if not path.exists():
        return None
    document = load_spec_file(path)
    return document if isinstance(document, dict) else None


def locate(name_or_path: str, storage_path: str | None = None, database_url: str | None = None,
           *, must_exist: bool = True) -> SweepRef:
    """The sweep a verb names: a path to its run directory, or a name under ``storage_path``.

    The database is ``database_url``, else the one the saved spec names (unless it has a
    password, which is never saved), else the SQLite file in the run directory.
    """
    if not name_or_path or name_or_path in (".", ".."):
        raise CLIError(f"expected a sweep name or run directory, got {name_or_path!r}")
    if database_url is not None:
        check_url_flag(database_url)
    root = Path(storage_path or default_storage_path()).expanduser().absolute()
    given = Path(name_or_path).expanduser()
    if os.sep in name_or_path or (os.altsep and os.altsep in name_or_path):
        run_dir = given.absolute()
    elif not (root / name_or_path).exists() and (given / DB_FILE).exists():
        run_dir = given.absolute()
    elif storage_path is None and not (root / name_or_path).exists() and name_or_path in _read_index():
        run_dir = Path(_read_index()[name_or_path])  # a sweep whose spec named another storage path
    else:
        run_dir = root / name_or_path
    hidden = False  # the saved spec names a database whose password was not saved
    if database_url is None:
        saved = read_saved_spec(run_dir) if run_dir.is_dir() else None
        stored_url = (saved or {}).get("database_url")
        if isinstance(stored_url, str):
            hidden = has_password(stored_url)
            database_url = None if hidden else stored_url
            if database_url is not None:
                check_url_flag(database_url, f"database_url in {run_dir / SPEC_FILE}")
    ref = SweepRef(name=run_dir.name, run_dir=run_dir, database_url=database_url)
    if must_exist and hidden:
        raise CLIError(f"sweep {ref.name!r} is stored in a database whose URL has a password, which is "
                       f"never saved: pass the URL with --database-url")
    if must_exist and database_url is None and not (run_dir / DB_FILE).exists():
        raise CLIError(f"no sweep named {ref.name!r} in {run_dir.parent} (no {DB_FILE} in {run_dir}); "
                       f"`tuner ls --storage-path DIR` lists the sweeps of a storage path")
    return ref


def check_url_flag(url: str, what: str = "--database-url") -> None:
    """A malformed database URL (or one of a database whose driver is not installed) is a bad
    flag: a CLIError naming ``what`` and the allowed forms."""
    from tuner.store import check_database_url

    try:
        check_database_url(url, field=what)
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def open_store(ref: SweepRef) -> Any:
    """The sweep's store, opened for reading (nothing is created or written); a database that
    cannot be opened is a CLIError."""
    from tuner.store import NoSchemaError, Store, StoreError

    try:
        return Store(ref.url, create=False)
    except NoSchemaError as exc:  # empty, or no tuner tables: a sweep just starting, or no tuner database
        raise CLIError(_no_tables(ref, exc), EXIT_FAILED) from None
    except ValueError as exc:  # a malformed URL
        raise CLIError(first_line(exc, ref.url), EXIT_USAGE) from None
    except StoreError as exc:  # it says what and where
        raise CLIError(first_line(exc, ref.url), EXIT_FAILED) from None
    except Exception as exc:  # noqa: BLE001 - anything else the driver raises
        raise CLIError(f"cannot open the store {ref.url_for_display}: {first_line(exc, ref.url)}",
                       EXIT_FAILED) from None


def _no_tables(ref: SweepRef, exc: BaseException) -> str:
    """The line for a store without tuner tables: a sweep whose driver is creating them, or the
    store's own line (an empty file, a database that is no tuner database)."""
    from tuner.execution.sweep_lock import running_driver
    from tuner.store import StoreError

    try:
        holder = running_driver(ref.url, ref.name, ref.run_dir) if ref.name else None
    except (StoreError, ValueError):
        holder = None
    if holder is not None:
        return f"sweep {ref.name!r} is starting ({holder}): its store has no tables yet; ask again in a moment"
    return first_line(exc, ref.url)


def stored_experiment(ref: SweepRef) -> dict[str, Any]:
    """The sweep's experiment record (name, spec, metric, ...; the spec's paths under ``ref.run_dir``
    when the run directory was moved or copied there); a sweep not in its store is a CLIError."""
    from tuner.relocation import find_sweep

    store = open_store(ref)
    try:
        experiment, _ = find_sweep(store, ref.run_dir, own_store=ref.database_url is None)
    finally:
        store.close()
    if experiment is None:
        raise CLIError(not_found(ref))
    return experiment


def not_found(ref: SweepRef) -> str:
    """The line saying that sweep ``ref`` is not in its store, and why when its run directory
    tells: a sweep of a shared database keeps its name when its folder is moved or copied."""
    line = f"no sweep named {ref.name!r} in the store {ref.url_for_display}"
    try:
        started_as = (read_saved_spec(ref.run_dir) or {}).get("name") if ref.database_url else None
    except CLIError:  # an unreadable sweep.yaml tells nothing
        started_as = None
    if isinstance(started_as, str) and started_as != ref.name:
        line += (f": {ref.run_dir} holds sweep {started_as!r} (its {SPEC_FILE} says so), moved or copied there; "
                 f"a sweep in a shared database keeps its name, so name its folder {started_as!r} again")
    return line


def first_line(exc: BaseException, url: str | None = None) -> str:
    """The first line of an error's message, with the password of ``url`` masked if it shows."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    if url and has_password(url):
        from sqlalchemy.engine import make_url

        password = make_url(url).password
        if password:
            text = text.replace(str(password), "***")
    return text


def _index_path() -> Path:
    return Path(default_storage_path()).expanduser().absolute() / INDEX_FILE


def _read_index() -> dict[str, str]:
    import json

    try:
        entries = json.loads(_index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(entries, dict) else {}


def remember_location(ref: SweepRef) -> None:
    """Record where a sweep outside the default storage path lives (the newest sweep of a name
    wins); a no-op for one inside it, and when the index cannot be written (the sweep still runs)."""
    import json

    root = Path(default_storage_path()).expanduser().absolute()
    if ref.run_dir.parent == root:
        return
    path = _index_path()
    entries = _read_index()
    entries[ref.name] = str(ref.run_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


#: Where every verb reads its database URL from when no --database-url is given.
DATABASE_URL_ENV = "TUNER_DATABASE_URL"


def location_flags(ref: SweepRef) -> str:
    """The flags a printed command needs to find ``ref`` (empty when its name alone does), to be
    run as printed: the storage path, and the database unless ``$TUNER_DATABASE_URL`` names it.
    A URL is printed as it is, but for its password (never shown: type it, or set the variable)."""
    flags = ""
    if ref.run_dir.parent != Path(default_storage_path()).expanduser().absolute():
        flags += f" --storage-path {shlex.quote(str(ref.run_dir.parent))}"
    return flags + database_flag(ref.database_url)


def database_flag(url: str | None) -> str:
    """`` --database-url URL`` for a printed command (empty when ``$TUNER_DATABASE_URL`` gives it,
    unless this is a submitted sweep's driver: `tuner submit` set the variable there, not the user)."""
    if not url or (url == os.environ.get(DATABASE_URL_ENV) and not os.environ.get("TUNER_JOB_ID")):
        return ""
    from tuner.store import mask_url

    return f" --database-url {shlex.quote(mask_url(url))}"

"""Schema versions: a database made by the first schema version upgrades to this one (SQLite and
PostgreSQL), an older or newer database is refused with a message that says what to do, and the
migrations build exactly the tables of tuner.store.schema."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from tuner.store import SCHEMA_VERSION, Store, StoreError, database_version, upgrade
from tuner.store import migrate, schema

# ------------------------------------------------------------------------ the first schema, frozen
# A verbatim copy of the tables of schema version 1 (tuner/store/schema.py at commit fcf9b8e), which
# that store made with create_all and stamped with one row in schema_version. Never edit.

V1 = sa.MetaData()
sa.Table("schema_version", V1, sa.Column("version", sa.Integer, nullable=False))
sa.Table(
    "experiments", V1,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("metric", sa.String(255), nullable=True),
    sa.Column("mode", sa.String(16), nullable=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)
sa.Table(
    "trials", V1,
    sa.Column("trial_id", sa.String(64), primary_key=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("trial_index", sa.Integer, nullable=False),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("config_blob", sa.LargeBinary, nullable=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("num_failures", sa.Integer, nullable=False, default=0, server_default="0"),
    sa.Column("checkpoint_path", sa.Text, nullable=True),
    sa.Column("last_result", sa.Text, nullable=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)
sa.Table(
    "results", V1,
    sa.Column("experiment_id", sa.Integer, nullable=False, index=True),
    sa.Column("trial_id", sa.String(64), sa.ForeignKey("trials.trial_id", ondelete="CASCADE"), nullable=False),
    sa.Column("iteration", sa.Integer, nullable=False),
    sa.Column("timestamp", sa.Double, nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("trial_id", "iteration", name="pk_results"),
)
sa.Table(
    "experiment_state", V1,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False),
    sa.Column("key", sa.String(255), nullable=False),
    sa.Column("value", sa.LargeBinary, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.PrimaryKeyConstraint("experiment_id", "key", name="pk_experiment_state"),
)

N_TRIALS, N_ITER = 3, 20


def _result(trial: int, it: int) -> dict:
    return {"training_iteration": it, "score": trial * 100 + it, "trial_id": f"t{trial}",
            "info": {"learner": {"kl": 0.01 * it}}, "timestamp": 1_700_000_000.0 + it}


def make_v1_database(url: str, *, with_exploits: bool = False) -> None:
    """A database as the first schema version's store left it: tables, version row and data
    (JSON written the way its codec wrote it). ``with_exploits``: also the exploits table that
    builds between the exploits table and the migrations created in such databases."""
    engine = sa.create_engine(url)
    if sa.make_url(url).get_backend_name() == "sqlite":
        Path(sa.make_url(url).database).parent.mkdir(parents=True, exist_ok=True)
    try:
        with engine.begin() as conn:
            V1.create_all(conn)
            t = V1.tables
            conn.execute(t["schema_version"].insert().values(version=1))
            eid = conn.execute(t["experiments"].insert().values(
                name="old-sweep", spec=json.dumps({"stop": {"training_iteration": N_ITER}}),
                metric="score", mode="max", status="TERMINATED", created_at=1.0, updated_at=2.0,
            )).inserted_primary_key[0]
            for i in range(N_TRIALS):
                conn.execute(t["trials"].insert().values(
                    trial_id=f"t{i}", experiment_id=eid, trial_index=i, config=json.dumps({"lr": 10.0 ** -i}),
                    config_blob=b"\x80\x04pickle", status="TERMINATED", num_failures=i,
                    checkpoint_path=f"/ckpt/{i}", last_result=json.dumps(_result(i, N_ITER)),
                    created_at=1.0, updated_at=2.0,
                ))
                conn.execute(t["results"].insert(), [
                    {"experiment_id": eid, "trial_id": f"t{i}", "iteration": it, "timestamp": 1_700_000_000.0 + it,
                     "data": json.dumps(_result(i, it))}
                    for it in range(1, N_ITER + 1)
                ])
            conn.execute(t["experiment_state"].insert().values(
                experiment_id=eid, key="searcher", value=b"state-v1", updated_at=2.0))
            if with_exploits:
                schema.exploits.create(conn)
                conn.execute(schema.exploits.insert().values(
                    experiment_id=eid, trial_id="t0", donor_trial_id="t2", iteration=5, timestamp=3.0,
                    old_config='{"lr":1.0}', new_config='{"lr":0.01}', checkpoint_path="/ckpt/2"))
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _versions(url: str) -> tuple[list[int], list[str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = set(sa.inspect(conn).get_table_names())
            sv = conn.execute(sa.select(schema.schema_version.c.version)).scalars().all()
            av = (conn.execute(sa.select(schema.alembic_version.c.version_num)).scalars().all()
                  if "alembic_version" in names else [])
            return sv, av
    finally:
        engine.dispose()


def _check_v1_data_intact(store: Store) -> int:
    exp = store.get_experiment("old-sweep")
    assert exp is not None
    assert exp["spec"] == {"stop": {"training_iteration": N_ITER}}
    assert (exp["metric"], exp["mode"], exp["status"]) == ("score", "max", "TERMINATED")
    eid = exp["id"]
    trials = store.trials(eid)
    assert [t["trial_id"] for t in trials] == [f"t{i}" for i in range(N_TRIALS)]
    assert [t["config"] for t in trials] == [{"lr": 10.0 ** -i} for i in range(N_TRIALS)]
    assert [t["num_failures"] for t in trials] == list(range(N_TRIALS))
    assert all(t["config_blob"] == b"\x80\x04pickle" for t in trials)
    assert trials[1]["last_result"] == _result(1, N_ITER)
    assert store.results(eid) == [_result(i, it) for i in range(N_TRIALS) for it in range(1, N_ITER + 1)]
    assert store.load_state(eid, "searcher") == b"state-v1"
    assert store.best_trial(eid, "score", "max")["trial_id"] == f"t{N_TRIALS - 1}"
    return eid


# ------------------------------------------------------------------------------------------- tests


def test_v1_database_upgrades_with_data_intact(url):
    make_v1_database(url)
    assert database_version(url) == 1
    assert upgrade(url) == (1, SCHEMA_VERSION)
    assert _versions(url) == ([SCHEMA_VERSION], [schema.HEAD_REVISION])
    engine = sa.create_engine(url)
    try:  # version 2 filled trials.metric_value from the last results (metric "score")
        with engine.connect() as conn:
            got = conn.execute(sa.text("SELECT metric_value FROM trials ORDER BY trial_index")).scalars().all()
    finally:
        engine.dispose()
    assert got == [float(i * 100 + N_ITER) for i in range(N_TRIALS)]
    with Store(url, create=False) as store:
        eid = _check_v1_data_intact(store)
        # The table version 2 added works, and so do writes to the old ones.
        store.add_exploit(eid, "t0", "t2", 7, {"lr": 1.0}, {"lr": 0.01}, "/ckpt/2")
        store.add_results(eid, [("t0", N_ITER + 1, {"score": 1})])
        store.update_trial("t0", status="RUNNING")
        [ex] = store.exploits(eid)
        assert (ex["trial_id"], ex["donor_trial_id"], ex["iteration"]) == ("t0", "t2", 7)
        assert ex["old_config"] == {"lr": 1.0} and ex["new_config"] == {"lr": 0.01}
        assert len(store.results(eid, "t0")) == N_ITER + 1
        assert store.trials(eid)[0]["status"] == "RUNNING"
    assert upgrade(url) == (SCHEMA_VERSION, SCHEMA_VERSION)  # again: nothing to do
    assert database_version(url) == SCHEMA_VERSION


def test_v1_database_is_refused_with_how_to_upgrade(url):
    make_v1_database(url)
    for kwargs in ({}, {"create": False}):
        with pytest.raises(StoreError) as info:
            Store(url, **kwargs)
        msg = str(info.value)
        assert "schema version 1" in msg and f"expects schema version {SCHEMA_VERSION}" in msg
        assert "tuner.store.upgrade(" in msg and "upgrade=True" in msg
    # Refusing it changed nothing.
    assert "exploits" not in _tables(url)
    assert _versions(url) == ([1], [])


def test_store_upgrade_true_migrates_in_place(url):
    make_v1_database(url)
    with Store(url, upgrade=True) as store:
        eid = _check_v1_data_intact(store)
        store.add_exploit(eid, "t1", "t2", 3, {}, {}, None)
        assert len(store.exploits(eid)) == 1
    with Store(url, upgrade=True) as store:  # at the newest version already: no-op
        assert len(store.exploits(eid)) == 1
    assert _versions(url) == ([SCHEMA_VERSION], [schema.HEAD_REVISION])


def test_v1_database_that_already_has_exploits_keeps_them(url):
    """Builds between the exploits table and the migrations created exploits in version-1
    databases: the migration keeps that table and its rows."""
    make_v1_database(url, with_exploits=True)
    assert upgrade(url) == (1, SCHEMA_VERSION)
    with Store(url, create=False) as store:
        eid = _check_v1_data_intact(store)
        [ex] = store.exploits(eid)
        assert (ex["trial_id"], ex["donor_trial_id"], ex["new_config"]) == ("t0", "t2", {"lr": 0.01})


def test_newer_database_is_refused(url):
    Store(url).close()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(schema.schema_version.update().values(version=SCHEMA_VERSION + 1))
    finally:
        engine.dispose()
    for kwargs in ({}, {"upgrade": True}):
        with pytest.raises(StoreError, match="upgrade tuner") as info:
            Store(url, **kwargs)
        assert f"version {SCHEMA_VERSION + 1}" in str(info.value)
    with pytest.raises(StoreError, match="upgrade tuner"):
        upgrade(url)


def test_new_database_is_created_at_the_newest_version(url):
    with Store(url) as store:
        assert store.get_or_create_experiment("e", spec={}, metric=None, mode=None)
    assert _versions(url) == ([SCHEMA_VERSION], [schema.HEAD_REVISION])
    assert {t.name for t in schema.metadata.sorted_tables} <= _tables(url)


def test_upgrade_of_an_empty_database_creates_the_schema(url):
    if sa.make_url(url).get_backend_name() == "sqlite":
        assert database_version(url) is None
        with pytest.raises(StoreError, match="no SQLite database"):
            upgrade(url)  # a mistyped path is not silently made a new database
        assert not Path(sa.make_url(url).database).exists()
        Path(sa.make_url(url).database).parent.mkdir(parents=True)
        sa.create_engine(url).connect().close()  # an empty file
    assert upgrade(url) == (None, SCHEMA_VERSION)
    assert _versions(url) == ([SCHEMA_VERSION], [schema.HEAD_REVISION])


def _alembic(conn: sa.Connection, command_name: str, revision: str) -> None:
    from alembic import command

    with conn.begin():
        getattr(command, command_name)(migrate.alembic_config(conn), revision)


def test_migrations_match_the_tables(url):
    """Replaying every migration from nothing gives exactly the tables create_all makes, and each
    revision leaves the schema version it stands for; downgrading to version 1 and back works."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    if sa.make_url(url).get_backend_name() == "sqlite":
        Path(sa.make_url(url).database).parent.mkdir(parents=True)
    engine = migrate._engine(url) if sa.make_url(url).get_backend_name() == "sqlite" else sa.create_engine(url)
    try:
        with engine.connect() as conn:
            _alembic(conn, "upgrade", "head")
            with conn.begin():
                diff = compare_metadata(MigrationContext.configure(conn), schema.metadata)
            assert diff == []
            with conn.begin():
                assert migrate.read_schema_version(conn) == SCHEMA_VERSION
            _alembic(conn, "downgrade", schema.REVISIONS[1])
            with conn.begin():
                assert migrate.read_schema_version(conn) == 1
                assert "exploits" not in sa.inspect(conn).get_table_names()
            _alembic(conn, "upgrade", "head")
    finally:
        engine.dispose()
    with Store(url, create=False) as store:
        eid = store.get_or_create_experiment("e", spec={}, metric=None, mode=None)
        store.add_exploit(eid, "a", "b", 1, {}, {}, None)
        assert len(store.exploits(eid)) == 1


def test_revisions_are_the_schema_versions():
    """schema.REVISIONS names every revision shipped, in order, and HEAD_REVISION is Alembic's head."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert script.get_current_head() == schema.HEAD_REVISION == schema.REVISIONS[SCHEMA_VERSION]
    chain = [s.revision for s in reversed(list(script.walk_revisions()))]
    assert chain == [schema.REVISIONS[v] for v in sorted(schema.REVISIONS)]
    for version, revision in schema.REVISIONS.items():
        path = Path(script.get_revision(revision).path)
        spec = importlib.util.spec_from_file_location(f"_rev_{revision}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert module.SCHEMA_VERSION == version, path
    # Shipped inside the package (no alembic.ini): the script directory is under tuner/store.
    assert migrate.MIGRATIONS_DIR.is_relative_to(Path(schema.__file__).parent)
    assert (migrate.MIGRATIONS_DIR / "env.py").is_file()


def test_failed_upgrade_changes_nothing(url):
    """The upgrade runs in one transaction (SQLite too): a migration that fails half-way leaves the
    database as it was, still at version 1 and still refused with the upgrade hint."""
    make_v1_database(url)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:  # index names are global: revision 0002's index will clash
            conn.execute(sa.text("CREATE INDEX ix_exploits_experiment_id ON trials (trial_index)"))
    finally:
        engine.dispose()
    with pytest.raises(sa.exc.DBAPIError):
        upgrade(url)
    assert "exploits" not in _tables(url)
    assert _versions(url) == ([1], [])
    with pytest.raises(StoreError, match="tuner.store.upgrade"):
        Store(url)


def test_v2_database_upgrades_to_checkpoint_records(url):
    """Version 3 adds the checkpoints table and trials.trial_dir; a version-2 database keeps its
    data, and the new table and column work once upgraded (recording a path again replaces its row)."""
    make_v1_database(url)
    sqlite = sa.make_url(url).get_backend_name() == "sqlite"
    engine = migrate._engine(url) if sqlite else sa.create_engine(url)
    try:
        with engine.connect() as conn:
            with conn.begin():
                migrate.stamp(conn, schema.REVISIONS[1])
            _alembic(conn, "upgrade", schema.REVISIONS[2])
    finally:
        engine.dispose()
    assert database_version(url) == 2 and "checkpoints" not in _tables(url)
    with pytest.raises(StoreError, match="schema version 2"):
        Store(url)
    assert upgrade(url) == (2, SCHEMA_VERSION)
    assert _versions(url) == ([SCHEMA_VERSION], [schema.HEAD_REVISION])
    with Store(url, create=False) as store:
        eid = _check_v1_data_intact(store)
        assert store.checkpoints(eid) == [] and all(t["trial_dir"] is None for t in store.trials(eid))
        store.record_checkpoint(eid, "t0", "/ckpt/0/a", iteration=3, metrics={"score": 1}, timestamp=5.0)
        store.record_checkpoint(eid, "t0", "/ckpt/0/b", iteration=4, metrics=None, timestamp=6.0)
        store.flush()
        store.record_checkpoint(eid, "t0", "/ckpt/0/a", iteration=3, metrics={"score": 1}, timestamp=5.0,
                                deleted_at=7.0)
        store.update_trial("t0", trial_dir="/runs/t0")
        rows = store.checkpoints(eid)
        assert [(r["path"], r["deleted"], r["deleted_at"], r["metrics"]) for r in rows] == [
            ("/ckpt/0/a", True, 7.0, {"score": 1}), ("/ckpt/0/b", False, None, None)]
        assert store.checkpoints(eid, "t1") == []
        assert store.trials(eid)[0]["trial_dir"] == "/runs/t0"
        assert store.delete_results(eid, "t1") == N_ITER and store.results(eid, "t1") == []

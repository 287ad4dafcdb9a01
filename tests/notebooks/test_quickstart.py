"""notebooks/quickstart.ipynb runs top to bottom (small budget), its kernel joined to the session's Ray."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_runs_top_to_bottom(ray_session, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", ray_session.get_runtime_context().gcs_address)
    monkeypatch.setenv("TUNER_QUICKSTART_STEPS", "1024")
    monkeypatch.setenv("TUNER_QUICKSTART_SAMPLES", "2")
    monkeypatch.setenv("TUNER_QUICKSTART_STORAGE", str(tmp_path / "results"))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the plot
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    outputs = {i: cell.get("outputs", []) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"}
    errors = [o for cell_outputs in outputs.values() for o in cell_outputs if o.get("output_type") == "error"]
    assert not errors
    texts = [o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for cell_outputs in outputs.values()
             for o in cell_outputs]
    joined = "\n".join(texts)
    assert "best episode_return_mean:" in joined and "'lr':" in joined
    assert any("image/png" in o.get("data", {}) for cell_outputs in outputs.values() for o in cell_outputs), \
        "the learning-curve plot is missing"
    stores = list((tmp_path / "results").glob("quickstart_*/tuner.db"))
    assert len(stores) == 1

"""Long values shortened for printing, saying how long they were."""

from __future__ import annotations

from tuner.display import short_repr, short_text, short_value


def test_short_text_keeps_short_text_and_cuts_long_text_in_the_middle_with_its_length():
    assert short_text("abc") == "abc"
    assert short_text("a" * 80) == "a" * 80
    text = "h" * 40 + "m" * 10_000_000 + "t" * 40
    shown = short_text(text)
    assert len(shown) == 80
    assert shown.startswith("hhhh") and shown.endswith("tttt") and "...<10,000,080 chars>..." in shown
    assert short_text("x" * 1000, width=10).count("x") == 4  # never less than two characters of each end


def test_short_value_shortens_strings_and_containers_at_any_depth_and_leaves_the_input_alone():
    config = {"blob": "a" * 100_000, "lr": 0.1, "net": {"layers": list(range(100)), "name": "mlp"},
              "pair": (1, "b" * 200), "raw": b"\x00" * 500}
    shown = short_value(config)
    assert shown["lr"] == 0.1 and shown["net"]["name"] == "mlp"
    assert "<100,000 chars>" in shown["blob"] and len(shown["blob"]) == 80
    assert shown["net"]["layers"][:20] == list(range(20)) and shown["net"]["layers"][20] == "...<80 more items>"
    assert isinstance(shown["pair"], tuple) and "<200 chars>" in shown["pair"][1]
    assert isinstance(shown["raw"], str) and "chars>" in shown["raw"]
    assert len(config["blob"]) == 100_000 and len(config["net"]["layers"]) == 100  # the input is whole
    many = short_value({f"k{i}": i for i in range(50)})
    assert len(many) == 21 and many["..."] == "<30 more keys>"


def test_short_repr_is_short_whatever_the_value():
    class Huge:
        def __repr__(self) -> str:
            return "H" * 1_000_000

    assert short_repr({"a": 1}) == "{'a': 1}"
    assert len(short_repr({"blob": "a" * 10_000_000})) < 100
    assert len(short_repr([Huge()])) < 2000 and "<1,000,002 chars>" in short_repr([Huge()])

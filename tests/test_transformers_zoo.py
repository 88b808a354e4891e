"""benchmarks/transformers_zoo.py, the whole-library check: its per-model function run in-process on a
few model types, and its generic config shrinking."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers")

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "transformers_zoo.py"
_spec = importlib.util.spec_from_file_location("transformers_zoo", _PATH)
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)
import tiny_configs  # noqa: E402  (benchmarks/, on sys.path once the check is loaded)


@pytest.mark.parametrize("model_type, main_inputs", [
    ("bert", {"input_ids"}),
    ("gpt2", {"input_ids"}),
    ("t5", {"input_ids", "decoder_input_ids"}),  # an encoder-decoder: decoder ids are made too
])
def test_check_model_runs_both_engines_and_matches_eager(model_type, main_inputs):
    record = zoo.check_model(model_type)
    assert record["status"] == "built", record.get("build_error")
    assert record["stage"] == "done" and set(record["inputs"]) == main_inputs
    assert record["parameters"] < 1_000_000  # built tiny
    for engine in zoo.JIT_ENGINES:
        run = record[engine]
        assert run["error"] is None and run["wrong"] is None, run
        assert run["graphs"] == run["graphs_first_call"] >= 1  # compiled once; the second call hit the cache
        assert run["breaks"] == len(run["reasons"])
    assert not zoo.differs(record)
    assert "one graph: pyframe 1, dynamo 1 (of 1)" in zoo.report([record], "test")


def test_shrink_dict_keeps_divisibility_and_renumbers_special_ids():
    ids: dict[int, int] = {}
    config = {
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 11008, "num_hidden_layers": 32, "vocab_size": 152064, "image_token_id": 151655,
        "layer_types": ["full_attention"] * 32, "num_channels": 3,
        "vision_config": {"hidden_size": 1280, "num_heads": 16, "depth": 32, "patch_size": 14, "image_size": 224,
                          "fullatt_block_indexes": [7, 15, 23, 31]},
        "rope_parameters": {"mrope_section": [16, 24, 24], "rope_theta": 1e6},
    }
    tiny = tiny_configs.shrink_dict(config, ids)
    assert tiny["hidden_size"] % tiny["num_attention_heads"] == 0
    assert tiny["num_attention_heads"] % tiny["num_key_value_heads"] == 0
    assert tiny["num_key_value_heads"] < tiny["num_attention_heads"]  # grouped-query attention stays grouped
    assert tiny["num_hidden_layers"] == len(tiny["layer_types"]) == tiny_configs.LAYERS
    assert tiny["image_token_id"] < tiny["vocab_size"] and ids == {151655: tiny["image_token_id"]}
    assert tiny["num_channels"] == 3
    vision = tiny["vision_config"]
    assert vision["hidden_size"] % vision["num_heads"] == 0 and vision["depth"] == tiny_configs.LAYERS
    assert vision["image_size"] % vision["patch_size"] == 0
    assert all(0 <= i < tiny_configs.LAYERS for i in vision["fullatt_block_indexes"])
    assert sum(tiny["rope_parameters"]["mrope_section"]) == tiny_configs.HEAD_DIM // 2

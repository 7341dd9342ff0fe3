import pytest
import yaml

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.llm.backends import clear_backend_cache, get_backend, register_backend


def write(tmp_path, data):
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_default_profile_runs_the_bundled_model_on_llamacpp():
    profile = load_profile(MODEL_CONFIG)
    assert profile.name == "smollm2-135m"
    assert profile.backend == "llamacpp"
    assert profile.model.model_path == "bundled:smollm2-135m"


def test_named_profile_inherits_the_default_and_overrides_what_it_names(tmp_path):
    path = write(
        tmp_path,
        {
            "model": {"backend": "mock", "n_ctx": 2048},
            "generation": {"max_new_tokens": 100, "temperature": 0},
            "tool_calling": {"mode": "prompt_json", "max_retries": 2},
            "models": {"fast": {"max_new_tokens": 50, "tool_calling": {"mode": "constrained"}}},
        },
    )
    fast = load_profile(path, "fast")
    assert fast.model.n_ctx == 2048
    assert fast.generation.max_new_tokens == 50
    assert fast.tool_calling.mode == "constrained"
    assert fast.tool_calling.max_retries == 2
    assert load_profile(path).generation.max_new_tokens == 100


def test_unknown_profile_lists_the_available_ones():
    with pytest.raises(ConfigError, match=r"unknown model_name 'nope'. Available: .*mock"):
        load_profile(MODEL_CONFIG, "nope")


def test_cli_tool_calling_overrides_the_profile():
    assert load_profile(MODEL_CONFIG, "mock", tool_calling="builtin").tool_calling.mode == "builtin"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"model": {"backend": "mock", "temprature": 0}}, "unknown keys.*temprature"),
        ({"generation": {"max_new_tokens": -1}}, "max_new_tokens"),
        ({"tool_calling": {"mode": "xml"}}, "mode"),
        ({"tool_calling": {"conflict_policy": "both"}}, "conflict_policy"),
        ({"models": "x"}, "must be a mapping"),
    ],
)
def test_wrong_config_is_a_clear_error(tmp_path, data, reason):
    with pytest.raises(ConfigError, match=reason):
        load_profile(write(tmp_path, data), None if "models" not in data else "x")


def test_missing_or_malformed_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_profile(bad)


def test_n_threads_and_n_batch_come_from_the_environment_when_set(tmp_path, monkeypatch):
    """LOKAL_N_THREADS / LOKAL_N_BATCH override every profile (another summation order in
    llama.cpp, as on another CPU: the model tests run with both)."""
    path = write(tmp_path, {"model": {"backend": "mock", "n_threads": 3, "n_batch": 64}})
    monkeypatch.delenv("LOKAL_N_THREADS", raising=False)
    monkeypatch.delenv("LOKAL_N_BATCH", raising=False)
    model = load_profile(path).model
    assert (model.n_threads, model.n_batch) == (3, 64)
    assert load_profile(MODEL_CONFIG).model.n_threads is None  # llama.cpp: every CPU
    monkeypatch.setenv("LOKAL_N_THREADS", "1")
    monkeypatch.setenv("LOKAL_N_BATCH", "7")
    for profile in (load_profile(path), load_profile(MODEL_CONFIG, "smollm2-135m-free")):
        assert (profile.model.n_threads, profile.model.n_batch) == (1, 7)
    monkeypatch.setenv("LOKAL_N_THREADS", "")  # empty: not set
    assert load_profile(path).model.n_threads == 3
    monkeypatch.setenv("LOKAL_N_BATCH", "0")
    with pytest.raises(ConfigError, match="n_batch"):
        load_profile(path)


def test_backends_are_reloaded_only_when_load_settings_change(tmp_path):
    loads = []

    class CountingBackend:  # a fake: counts loads instead of loading weights
        name = "counting"
        capabilities = frozenset({"prompt_json"})

        def __init__(self, profile):
            loads.append(profile.name)

        def generate(self, request):
            raise AssertionError("not used")

    register_backend("counting", CountingBackend, lambda p: (p.model.model_path, p.model.n_ctx))
    clear_backend_cache()
    path = write(
        tmp_path,
        {
            "model": {"backend": "counting", "model_path": "m.gguf", "n_ctx": 1024},
            "models": {
                "a": {"max_new_tokens": 10},
                "b": {"max_new_tokens": 20, "temperature": 0.7},
                "c": {"n_ctx": 2048},
            },
        },
    )
    first = get_backend(load_profile(path, "a"))
    assert get_backend(load_profile(path, "b")) is first
    assert get_backend(load_profile(path, "c")) is not first
    assert loads == ["a", "c"]
    clear_backend_cache()


def test_a_profile_is_changed_by_name_not_rebuilt_by_position():
    """Profile.replace (issue 22): fields changed by name; nothing outside config.py builds
    a Profile positionally."""
    import ast

    from helpers import REPO

    profile = load_profile(MODEL_CONFIG)
    generation = profile.generation.model_copy(update={"max_new_tokens": 64})
    changed = profile.replace(generation=generation)
    assert changed.generation.max_new_tokens == 64 and changed.model == profile.model
    assert profile.generation.max_new_tokens != 64  # the original is untouched
    assert profile.with_backend("mock").backend == "mock"
    for path in (REPO / "src" / "lokal").rglob("*.py"):
        if path.name == "config.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        built = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Profile"
        ]
        assert built == [], path

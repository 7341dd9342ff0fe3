"""How the llama.cpp backend loads a model on CPUs with AMX (no model loaded here)."""

import ctypes
import types

import pytest

pytest.importorskip("llama_cpp")

from lokal.llm.backends import llamacpp


class Params(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32), ("use_extra_bufts", ctypes.c_bool)]


def fake_llama_cpp():
    def defaults():
        return Params(n_gpu_layers=0, use_extra_bufts=True)

    return types.SimpleNamespace(
        llama_cpp=types.SimpleNamespace(llama_model_default_params=defaults)
    )


@pytest.mark.parametrize("amx", [True, False])
def test_amx_repacking_is_off_while_loading_on_amx_cpus_only(monkeypatch, amx):
    """llama.cpp's AMX weight repacking crashes at the first decode (ggml-org/llama.cpp#20824):
    on such CPUs the model is loaded without extra buffer types, and the defaults come back."""
    monkeypatch.setattr(llamacpp, "_amx_cpu", lambda: amx)
    fake = fake_llama_cpp()
    original = fake.llama_cpp.llama_model_default_params
    with llamacpp._without_amx_repacking(fake):
        assert fake.llama_cpp.llama_model_default_params().use_extra_bufts is (not amx)
    assert fake.llama_cpp.llama_model_default_params is original
    assert original().use_extra_bufts is True


def test_the_real_binding_has_the_field():
    import llama_cpp

    fields = dict(llama_cpp.llama_cpp.llama_model_params._fields_)
    assert "use_extra_bufts" in fields  # else the AMX guard silently does nothing

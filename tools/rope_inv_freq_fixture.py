"""Prints the RoPE inverse frequencies transformers computes, as C++ hex-float arrays for
tests/models/rope_freq_test.cpp.  Run: python tools/rope_inv_freq_fixture.py  (transformers 5.24, torch, CPU)."""
import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding


def hexf(x):
    """Shortest C++ hex-float spelling of an f32 value: 0x1.a11582p-1."""
    m, e = float(x).hex().split("p")
    m = m.rstrip("0").rstrip(".")
    return f"{m}p{e}f"


def emit(name, t):
    vals = [hexf(x) for x in t.tolist()]
    print(f"// {name}: {len(vals)} values")
    print(f"const float {name}[] = {{")
    for i in range(0, len(vals), 4):
        print("    " + ", ".join(vals[i:i + 4]) + ",")
    print("};")


print(f"// transformers {transformers.__version__}")
llama3 = LlamaConfig(hidden_size=4096, num_attention_heads=32, head_dim=128, max_position_embeddings=131072,
                     rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8192})
inv, _ = ROPE_INIT_FUNCTIONS["llama3"](llama3)
emit("kLlama3Theta5e5Hd128", inv)
default = LlamaConfig(hidden_size=4096, num_attention_heads=32, head_dim=128,
                      rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
inv, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(default)
emit("kDefaultTheta5e5Hd128", inv)
small = LlamaConfig(hidden_size=576, num_attention_heads=9, head_dim=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
inv, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(small)
emit("kDefaultTheta1e4Hd64", inv)

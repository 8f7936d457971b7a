#!/usr/bin/env python3
"""Training loss parity with PyTorch: the same tiny Llama / Mamba, init, batches and AdamW in transformers and anvil.

  train_parity.py make                      writes tests/fixtures/parity/{data,llama,mamba} (once, on a CPU machine)
  train_parity.py torch --arch llama --dtype f32 --out llama_torch_f32.json [--device cpu|cuda] [--set K=V ...]
  train_parity.py anvil --arch llama --dtype f32 --out llama_anvil_f32.json [--bin build/anvil] [--set K=V ...]
  compare_curves.py llama_torch_f32.json llama_anvil_f32.json --svg llama_f32.svg

The recipe tests/fixtures/parity/<arch>.toml is the single source of the run's settings: both trainers read it,
and --set overrides it the same way for both (anvil's own --set semantics: a dotted key, the value as TOML).

What makes the two runs the same:
  init     the checkpoint dir written by `make` (config.json + model.safetensors): transformers' own random init,
           loaded by anvil through model.init.
  batches  an anvil token shard of the fortune corpus (tokenized with tests/fixtures/tokenizers/llama3), read
           here with the layout of src/train/loader.h: window w = tokens [w*T, w*T + T + 1), step s takes windows
           [s*B, s*B + B) in stream order (the recipe sets data.shuffle = false), wrapping when < B windows are left.
  loss     mean cross-entropy over all B*T targets (anvil's lm_loss).
  optim    clip scale = min(1, grad_clip / global grad norm); torch.optim.AdamW with weight decay on the tensors
           anvil's Param::decay marks (not norms, biases, A_log, D); lr per step = src/train/lr_schedule.cpp.
  bf16     torch.autocast(bfloat16) over fp32 parameters (CUDA); anvil's dtype = "bf16" (bf16 compute, fp32
           masters, GPU only).
Output JSON: {"arch", "dtype", "trainer", "recipe", "set", "steps", "loss": [...], "lr": [...], "grad_norm": [...]}.
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import tomllib
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARITY = os.path.join("tests", "fixtures", "parity")
TOKENIZER = os.path.join("tests", "fixtures", "tokenizers", "llama3", "tokenizer.json")
VOCAB = 2048  # the tokenizer has 2000 ids; 48 rows never seen as inputs (only weight decay moves them)


# ---------------------------------------------------------------- recipe (the same --set semantics as anvil)

def load_recipe(arch, sets):
    path = os.path.join(PARITY, f"{arch}.toml")
    with open(os.path.join(ROOT, path), "rb") as f:
        r = tomllib.load(f)
    for kv in sets:
        key, _, value = kv.partition("=")
        try:
            v = tomllib.loads("v = " + value)["v"]
        except tomllib.TOMLDecodeError:
            v = value  # not TOML: a bare string, as anvil reads it
        t = r
        parts = key.split(".")
        for p in parts[:-1]:
            t = t.setdefault(p, {})
        t[parts[-1]] = v
    return path, r


def lr_at(step, o, steps):
    """src/train/lr_schedule.cpp, cosine and wsd, step 0-based."""
    peak, warmup, min_lr = o["lr"], o.get("warmup_steps", 0), o["lr"] * o.get("min_lr_ratio", 0.1)
    s = min(max(step, 0), steps - 1)
    if s < warmup:
        return peak * (s + 1) / warmup
    if o.get("schedule", "cosine") == "wsd":
        d = max(1, round(o.get("decay_fraction", 0.2) * steps))  # C++ llround: no .5 cases at these sizes
        start = steps - d
        return peak if s < start else peak + (min_lr - peak) * (s - start + 1) / d
    span = steps - 1 - warmup
    if span <= 0:
        return peak
    p = (s - warmup) / span
    return min_lr + (peak - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))


# ---------------------------------------------------------------- anvil token shards (src/train/token_shard.h)

def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_shard(path, tokens, tokenizer_id, vocab_size, eos_id, n_docs):
    payload = struct.pack(f"<{len(tokens)}H", *tokens)  # vocab <= 65536: u16
    head = b"ANVILTOK" + struct.pack("<IIQQQIiI8x", 1, 2, tokenizer_id, len(tokens), n_docs, vocab_size, eos_id,
                                     zlib.crc32(payload))
    assert len(head) == 60
    with open(path, "wb") as f:
        f.write(head + struct.pack("<I", zlib.crc32(head)) + payload)


def read_stream(data_dir):
    """The train split's tokens, shards concatenated (TokenStream)."""
    with open(os.path.join(data_dir, "meta.json")) as f:
        meta = json.load(f)
    tokens = []
    for name in meta["splits"]["train"]["shards"]:
        with open(os.path.join(data_dir, name), "rb") as f:
            raw = f.read()
        assert raw[:8] == b"ANVILTOK", name
        width, n = struct.unpack_from("<I", raw, 12)[0], struct.unpack_from("<Q", raw, 24)[0]
        tokens += struct.unpack_from(f"<{n}{'H' if width == 2 else 'I'}", raw, 64)
    return tokens


def batches(tokens, B, T, steps):
    """src/train/loader.h with shuffle = false: yields (B, T+1) windows per step."""
    n_windows = (len(tokens) - 1) // T
    assert n_windows >= B, f"{n_windows} windows < batch {B}"
    pos = 0
    for _ in range(steps):
        yield [tokens[(pos + r) * T:(pos + r) * T + T + 1] for r in range(B)]
        pos += B
        if pos + B > n_windows:
            pos = 0


# ---------------------------------------------------------------- make: init checkpoints + batches

def fortune_documents(corpus):
    """One document per entry between '%' lines, as `anvil prepare --separator %` splits them."""
    docs = []
    for name in sorted(os.listdir(corpus)):
        path = os.path.join(corpus, name)
        if "." in name or not os.path.isfile(path) or os.path.islink(path):
            continue  # .dat indexes, .u8 links
        with open(path, encoding="utf-8", errors="strict") as f:
            cur = []
            for line in f.read().split("\n"):
                if line == "%":
                    docs.append("\n".join(cur))
                    cur = []
                else:
                    cur.append(line)
            docs.append("\n".join(cur))
    return [d for d in docs if d.strip()]


def make(a):
    import torch
    from tokenizers import Tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, MambaConfig, MambaForCausalLM

    out = os.path.join(ROOT, PARITY)
    tok_path = os.path.join(ROOT, TOKENIZER)
    tok = Tokenizer.from_file(tok_path)
    eos, bos = tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|begin_of_text|>")
    recipe = load_recipe("llama", [])[1]["data"]
    B, T, steps = recipe["batch"], recipe["seq_len"], load_recipe("llama", [])[1]["steps"]
    need = steps * B * T + 1  # exactly one epoch of the 200-step run
    docs = fortune_documents(a.corpus)
    random.Random(0).shuffle(docs)  # mix the corpus files (otherwise the first steps are all 'art')
    tokens, n_docs = [], 0
    for d in docs:
        tokens += tok.encode(d, add_special_tokens=False).ids + [eos]
        n_docs += 1
        if len(tokens) >= need:
            break
    tokens = tokens[:need]
    data = os.path.join(out, "data")
    os.makedirs(data, exist_ok=True)
    with open(tok_path, "rb") as f:
        tid = fnv1a64(f.read())
    write_shard(os.path.join(data, "train-00000.tok"), tokens, tid, tok.get_vocab_size(), eos, n_docs)
    meta = {"format": "anvil-tokens", "version": 1, "tokenizer_id": f"{tid:016x}", "vocab_size": tok.get_vocab_size(),
            "eos_id": eos, "splits": {"train": {"shards": ["train-00000.tok"], "tokens": len(tokens), "docs": n_docs}}}
    with open(os.path.join(data, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")

    # The tiny fixtures' shapes (tools/make_*_fixture.py) with a real-text vocabulary; transformers' default init.
    llama = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
                        rope_theta=10000.0, max_position_embeddings=1024, tie_word_embeddings=False,
                        bos_token_id=bos, eos_token_id=eos)
    mamba = MambaConfig(vocab_size=VOCAB, hidden_size=64, state_size=16, num_hidden_layers=2, expand=2,
                        conv_kernel=4, time_step_rank="auto", tie_word_embeddings=True, use_mambapy=False,
                        bos_token_id=bos, eos_token_id=eos, pad_token_id=eos)
    for arch, cls, cfg in (("llama", LlamaForCausalLM, llama), ("mamba", MambaForCausalLM, mamba)):
        torch.manual_seed(0)
        model = cls(cfg)
        d = os.path.join(out, arch)
        model.save_pretrained(d)
        gen = os.path.join(d, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
    print(json.dumps({"tokens": len(tokens), "docs": n_docs, "out": out}))


# ---------------------------------------------------------------- torch trainer

def decays(name):
    """anvil's Param::decay (src/models/*/..._model.cpp): matrices, embeddings and conv weights; not norms,
    biases, A_log or D."""
    last = name.split(".")[-1]
    return not (name.endswith("norm.weight") or name.endswith("norm_f.weight") or last in ("bias", "A_log", "D"))


def train_torch(a):
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM

    path, r = load_recipe(a.arch, a.set)
    device = torch.device(a.device)
    if a.dtype == "bf16" and device.type != "cuda":
        sys.exit("train_parity: --dtype bf16 needs --device cuda (autocast bf16 with fp32 master weights)")
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 means f32 (anvil's f32 GEMMs do not use TF32)
    torch.backends.cudnn.allow_tf32 = False
    init = os.path.join(ROOT, r["model"]["init"])
    # attn "eager": plain softmax(QK^T)V; eval(): no dropout in these configs anyway, and transformers then
    # keeps to its pure-torch Mamba path (train mode may pick fused hub kernels when present).
    model = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32, attn_implementation="eager")
    model.to(device).eval()
    params = dict(model.named_parameters())  # tied lm_head appears once, as the embedding
    o = r["optim"]
    groups = [{"params": [p for n, p in params.items() if decays(n)], "weight_decay": o.get("weight_decay", 0.1)},
              {"params": [p for n, p in params.items() if not decays(n)], "weight_decay": 0.0}]
    betas = tuple(o.get("betas", [0.9, 0.95]))
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=betas, eps=o.get("eps", 1e-8), foreach=False)
    clip = o.get("grad_clip", 1.0)
    steps, B, T = r["steps"], r["data"]["batch"], r["data"]["seq_len"]
    assert r["data"].get("micro_batches", 1) == 1 and r["data"].get("shuffle", True) is False
    tokens = read_stream(os.path.join(ROOT, r["data"]["dir"]))
    losses, lrs, norms = [], [], []
    for step, rows in enumerate(batches(tokens, B, T, steps)):
        w = torch.tensor(rows, dtype=torch.int64, device=device)
        ids, targets = w[:, :-1], w[:, 1:]
        lr = lr_at(step, o, steps)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            logits = model(input_ids=ids, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in params.values()))
        scale = clip / norm if clip > 0 and norm > clip else 1.0
        if scale != 1.0:
            for p in params.values():
                p.grad.mul_(scale)
        opt.step()
        losses.append(loss.item())
        lrs.append(lr)
        norms.append(norm)
        if (step + 1) % 20 == 0 or step == 0:
            print(f"torch {a.arch} {a.dtype} step {step + 1}/{steps} loss {losses[-1]:.4f} lr {lr:.2e} "
                  f"norm {norm:.3f}", flush=True)
    write_curve(a, path, "torch " + torch.__version__, losses, lrs, norms)


# ---------------------------------------------------------------- anvil trainer (the real CLI path)

def train_anvil(a):
    path, r = load_recipe(a.arch, a.set)
    device = "gpu" if a.dtype == "bf16" else a.device
    run = tempfile.mkdtemp(prefix=f"parity-{a.arch}-")
    cmd = [os.path.abspath(a.bin), "train", path] + sum([["--set", s] for s in a.set], []) + \
          ["--set", f"out_dir={run}", "--set", f"device={device}", "--set", f"dtype={a.dtype}"]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    with open(os.path.join(run, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [x for x in rows if "loss" in x and "step" in x]
    write_curve(a, path, "anvil", [x["loss"] for x in rows], [x["lr"] for x in rows],
                [x["grad_norm"] for x in rows])
    shutil.rmtree(run, ignore_errors=True)


def write_curve(a, recipe_path, trainer, losses, lrs, norms):
    doc = {"arch": a.arch, "dtype": a.dtype, "trainer": trainer, "recipe": recipe_path, "set": a.set,
           "steps": len(losses), "loss": losses, "lr": lrs, "grad_norm": norms}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{trainer}: {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, wrote {a.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write the init checkpoints and the batches (tests/fixtures/parity)")
    m.add_argument("--corpus", default="/usr/share/games/fortunes")
    for name in ("torch", "anvil"):
        p = sub.add_parser(name, help=f"train with {name} and write the loss curve as JSON")
        p.add_argument("--arch", choices=["llama", "mamba"], required=True)
        p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
        p.add_argument("--out", required=True)
        p.add_argument("--set", action="append", default=[], help="override a recipe key, as `anvil train --set`")
        p.add_argument("--device", default="cpu", help="torch: cpu | cuda; anvil: cpu | gpu (bf16 runs on gpu)")
        if name == "anvil":
            p.add_argument("--bin", default=os.path.join(ROOT, "build", "anvil"))
    a = ap.parse_args()
    {"make": make, "torch": train_torch, "anvil": train_anvil}[a.cmd](a)


if __name__ == "__main__":
    main()

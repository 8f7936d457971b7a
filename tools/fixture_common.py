"""Shared parts of make_llama_fixture.py and make_mamba_fixture.py: fixed inputs, the reference run, saving.

reference.safetensors holds (all names fixed, so the C++ parity tests can look them up):
  prompt.{i}.input_ids   i64 [1, T_i]       three fixed prompts of different lengths
  prompt.{i}.logits      f32 [1, T_i, V]    forward logits
  prompt.{i}.greedy      i64 [steps]        greedy continuation (argmax, no cache, full recompute per step)
  prompt.{i}.greedy_margin f32 [steps]      top-1 minus top-2 logit at each step: a step with a tiny margin may
                                            legitimately flip under a different summation order
  batch.input_ids        i64 [B, T]
  batch.labels           i64 [B, T]         = input_ids, with -100 (ignored) on the first 5 tokens of row 1
  batch.logits           f32 [B, T, V]
  batch.loss             f32 []             transformers' loss: mean cross-entropy of logits[:, :-1] against
                                            labels[:, 1:], over labels != -100
  grad.{param}           f32                d loss / d param for every parameter (HF names; a tied lm_head
                                            has no entry of its own: its gradient is in the embedding's)
Only torch and long-standing transformers APIs are used, so this runs on transformers 5.17 and 5.24.
"""
import copy
import json
import os

import torch
from safetensors.torch import save_file

GREEDY_STEPS = 64
PROMPT_LENGTHS = (7, 16, 11)
BATCH, SEQ = 2, 24


def fixed_ids(vocab_size, shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, shape, generator=g, dtype=torch.int64)


def pick_device(arg, preset):
    if arg != "auto":
        return torch.device(arg)
    # Tiny fixtures are made on the CPU so they are reproducible anywhere; big presets need the GPU.
    if preset != "tiny" and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def build_model(model_cls, config, dtype, device, seed):
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialise directly in the storage dtype: no f32 copy of a big model
    try:
        with torch.device(device):
            model = model_cls(config)
    finally:
        torch.set_default_dtype(old)
    model.eval()  # no dropout, and the pure-torch paths (transformers picks fused kernels only when training)
    return model


@torch.no_grad()
def greedy(model, ids, steps):
    tokens, margins = [], []
    for _ in range(steps):
        last = model(input_ids=ids, use_cache=False).logits[:, -1].float()
        top = last.topk(2, dim=-1)
        nxt = top.indices[:, :1]
        tokens.append(int(nxt))
        margins.append(float(top.values[0, 0] - top.values[0, 1]))
        ids = torch.cat([ids, nxt], dim=1)
    return torch.tensor(tokens, dtype=torch.int64), torch.tensor(margins, dtype=torch.float32)


def exact_logits(model, out, device):
    """`<p>.logits_exact`: the same weights run in f64 (rounded to f32 when saved), for every `<p>.input_ids`.
    Deep models are checked against it: their f32 error is compared with transformers' own f32 error."""
    m64 = copy.deepcopy(model).to(torch.float64)
    for key in [k for k in out if k.endswith(".input_ids")]:
        with torch.no_grad():
            logits = m64(input_ids=out[key].to(device), use_cache=False).logits
        out[key.replace(".input_ids", ".logits_exact")] = logits.float().cpu()
    del m64


def reference_run(model, vocab_size, device, grads="all"):
    out = {}
    for i, t in enumerate(PROMPT_LENGTHS):
        ids = fixed_ids(vocab_size, (1, t), seed=100 + i)
        with torch.no_grad():
            logits = model(input_ids=ids.to(device), use_cache=False).logits
        out[f"prompt.{i}.input_ids"] = ids
        out[f"prompt.{i}.logits"] = logits.float().cpu()
        tok, margin = greedy(model, ids.to(device), GREEDY_STEPS)
        out[f"prompt.{i}.greedy"] = tok
        out[f"prompt.{i}.greedy_margin"] = margin

    ids = fixed_ids(vocab_size, (BATCH, SEQ), seed=200)
    labels = ids.clone()
    labels[1, :5] = -100
    model.zero_grad(set_to_none=True)
    res = model(input_ids=ids.to(device), labels=labels.to(device), use_cache=False)
    res.loss.backward()
    out["batch.input_ids"] = ids
    out["batch.labels"] = labels
    out["batch.logits"] = res.logits.detach().float().cpu()
    out["batch.loss"] = res.loss.detach().float().cpu().reshape([])
    if grads != "none":
        names = [n for n, _ in model.named_parameters()]
        if grads == "sample":  # big presets: embeddings, first and last layer, final norm, head
            last = max(int(n.split(".")[2]) for n in names if ".layers." in n)
            names = [n for n in names if ".layers." not in n or f".layers.0." in n or f".layers.{last}." in n]
        params = dict(model.named_parameters())
        for n in names:
            g = params[n].grad
            if g is None:
                raise RuntimeError(f"parameter {n} got no gradient")
            out[f"grad.{n}"] = g.float().cpu().contiguous()
    return out


def save(out_dir, model, tensors, meta):
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir)  # model.safetensors (or shards) + config.json
    gen = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen):  # not needed by anvil; keeps fixtures small and version-neutral
        os.remove(gen)
    meta = {k: str(v) for k, v in meta.items()}
    meta["torch"] = torch.__version__
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out_dir, "reference.safetensors"),
              metadata=meta)
    for f in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, f), 0o644)
    summary = {"loss": float(tensors["batch.loss"]), "files": sorted(os.listdir(out_dir))}
    print(json.dumps(summary))
